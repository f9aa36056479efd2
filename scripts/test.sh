#!/usr/bin/env bash
# The whole test suite, in this order:
#   1. scripts/setup.sh --tests: install what is missing, build build/
#      (release), build-asan/ (ASan+UBSan) and build-tsan/ (ThreadSanitizer)
#   2. formatting (clang-format --dry-run) and the layout checks
#      (scripts/check_layout.py, scripts/check_rule_ids.py)
#   3. the cmocka unit tests under ASan+UBSan (ctest in build-asan/)
#   4. the same unit tests under valgrind memcheck (scripts/memcheck.sh)
#   5. a fuzz smoke: every libFuzzer target for 5 s (tests/fuzz/run_all.sh)
#   6. the integration suite with real clients (pymongo, the Node.js driver,
#      mongosh, libmongoc) through the release and the ASan binary
#   7. a multi-worker subset of it through the TSan binary
# against FerretDB, or against MONGOGUARD_TEST_UPSTREAM when set. Arguments
# go to pytest (steps 6 and 7).
set -euo pipefail
cd "$(dirname "$0")/.."
# libmongoc's per-process /dev/shm counters: see tests/procs.py
export MONGOC_DISABLE_SHM=1
scripts/setup.sh --tests

step() { printf '==> %s\n' "$*"; step_start=$SECONDS; }
took() { printf '==> (%s: %d s)\n' "$1" $((SECONDS - step_start)); }

step "Formatting (clang-format --dry-run)"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror

step "Layout (file and function sizes, module includes, rule ids in their own files)"
python3 scripts/check_layout.py
python3 scripts/check_rule_ids.py --strict

# The index cache's server-bound unit test needs a real server: the one in
# MONGOGUARD_TEST_UPSTREAM, else a FerretDB started here for the unit runs
# (ASan and valgrind), stopped when this script exits.
. scripts/unit_upstream.sh
unit_upstream_start

step "Unit tests (cmocka, ASan+UBSan)"
(cd build-asan && ctest --output-on-failure)
took "unit tests under ASan"

step "Unit tests (cmocka, valgrind memcheck)"
scripts/memcheck.sh build
took "unit tests under valgrind"

step "Fuzz smoke (every target, 5 s each)"
tests/fuzz/run_all.sh --smoke 5
took "fuzz smoke"

# The integration suite runs twice: against the release binary users run,
# and against the ASan+UBSan binary, where a memory error makes mongoguard
# exit non-zero and the suite's shutdown check fail.
if [ -n "${MONGOGUARD_BIN:-}" ]; then
  bins=("$MONGOGUARD_BIN")
else
  bins=("$PWD/build/mongoguard" "$PWD/build-asan/mongoguard")
fi
for bin in "${bins[@]}"; do
  step "Integration tests through $bin"
  MONGOGUARD_BIN=$bin build/venv/bin/python -m pytest tests/integration -q -p no:cacheprovider "$@"
  took "integration through $bin"
done

# The multi-worker run through ThreadSanitizer: every proxy with 2 worker
# threads (conftest's MONGOGUARD_TEST_WORKERS), so sessions on two workers
# share the snapshot, the metrics, the index cache, the resolver, the
# findings ring and the capture queue. A race makes mongoguard exit 66 at
# once and the suite's shutdown check fail. The files: the clients, reload,
# the admin endpoint and metrics, the analyzers, and each module with a
# thread of its own (capture writer, resolver, fleet sink).
# test_restart_only_settings_are_named is left out here only: with
# --workers pinned by the flag, a `workers` key in the file is rightly no
# change, which is what that test checks for; it runs in both passes above.
step "Integration tests, 2 workers, through build-tsan/mongoguard (ThreadSanitizer)"
TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$PWD/scripts/tsan.supp" \
  MONGOGUARD_TEST_WORKERS=2 MONGOGUARD_BIN=$PWD/build-tsan/mongoguard \
  build/venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/integration/test_pymongo.py tests/integration/test_clients.py \
  tests/integration/test_reload.py tests/integration/test_admin.py \
  tests/integration/test_analyzers.py tests/integration/test_capture_report.py \
  tests/integration/test_srv.py tests/integration/test_fleet_sink.py \
  --deselect tests/integration/test_reload.py::test_restart_only_settings_are_named "$@"
took "integration under TSan"
