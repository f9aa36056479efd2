#!/usr/bin/env bash
# The cmocka unit tests (build/test_*) under valgrind memcheck, from the
# normal (non-ASan) build: valgrind sees what ASan does not (uninitialised
# reads, leaks through libraries built without ASan), and ASan's shadow
# memory and valgrind cannot share a process. Any memory error or definite/
# indirect leak fails the test with status 99.
#
#   scripts/memcheck.sh [BUILD_DIR]     (default build/; build it first)
#
# The index cache's server-bound test needs MG_TEST_UPSTREAM_URI: kept if
# set (scripts/test.sh sets it), else a FerretDB is started for this run.
# scripts/valgrind.supp holds third-party noise only, each entry with why.
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=${1:-build}
root=$PWD
. scripts/unit_upstream.sh
unit_upstream_start

tests=("$bdir"/test_*)
[ -x "${tests[0]}" ] || { echo "memcheck: no $bdir/test_* (build $bdir first)" >&2; exit 1; }
logdir=$bdir/memcheck
rm -rf "$logdir" && mkdir -p "$logdir"
failed=()
for t in "${tests[@]}"; do
  name=$(basename "$t")
  start=$SECONDS
  # cwd is the build directory, as under ctest.
  if (cd "$bdir" && valgrind --error-exitcode=99 --leak-check=full \
        --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
        --track-origins=yes --num-callers=30 \
        --suppressions="$root/scripts/valgrind.supp" --gen-suppressions=all \
        --log-file="memcheck/$name.log" "./$name" >"memcheck/$name.out" 2>&1); then
    echo "memcheck: $name ok ($((SECONDS - start)) s)"
  else
    echo "memcheck: $name FAILED (status $?): $logdir/$name.log" >&2
    failed+=("$name")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  for name in "${failed[@]}"; do
    echo "==== $name" >&2
    tail -n 60 "$logdir/$name.out" >&2
    grep -v -m 200 '^==[0-9]*== *$' "$logdir/$name.log" >&2 || true
  done
  echo "memcheck: ${#failed[@]} of ${#tests[@]} unit tests failed: ${failed[*]}" >&2
  exit 1
fi
echo "memcheck: all ${#tests[@]} unit tests clean"
