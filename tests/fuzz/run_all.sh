#!/usr/bin/env bash
# Fuzz smoke: every libFuzzer target (tests/fuzz/fuzz_*.c) for SECONDS each,
# on a copy of its corpus; exits non-zero if any target crashes, leaks,
# times out or runs out of memory. scripts/test.sh runs it with 5.
#
#   tests/fuzz/run_all.sh --smoke SECONDS
#
# Builds build-fuzz with clang first if it is missing (then keeps it up to
# date). A failing input is kept under build-fuzz/smoke-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" != "--smoke" ] || ! [[ "${2:-}" =~ ^[0-9]+$ ]] || [ $# -ne 2 ]; then
  echo "usage: tests/fuzz/run_all.sh --smoke SECONDS" >&2
  exit 2
fi
secs=$2
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang cmake -S . -B build-fuzz -G Ninja -DMG_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
fi
cmake --build build-fuzz
artifacts=$PWD/build-fuzz/smoke-artifacts
rm -rf "$artifacts" && mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
for src in tests/fuzz/fuzz_*.c; do
  t=$(basename "$src" .c)
  # libFuzzer adds what it finds to the first directory: work in a copy.
  mkdir -p "$work/$t"
  cp -r "tests/fuzz/corpus/$t/." "$work/$t/"
  if build-fuzz/"$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
       -dict=tests/fuzz/mongo.dict -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
       "$work/$t" >"$work/$t.log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
    echo "fuzz smoke: $t ok (${execs:-?} executions in ${secs} s)"
  else
    echo "fuzz smoke: $t FAILED; inputs in $artifacts:" >&2
    tail -n 60 "$work/$t.log" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz smoke: failed: ${failed[*]}" >&2
  exit 1
fi
