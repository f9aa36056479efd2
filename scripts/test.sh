#!/usr/bin/env bash
# The whole test suite: install what is missing, build (normal and
# sanitizer builds), check formatting, run the cmocka unit tests under
# ASan+UBSan, then the integration suite with real clients (pymongo, the
# Node.js driver, mongosh, libmongoc) through mongoguard against FerretDB,
# or against MONGOGUARD_TEST_UPSTREAM when set.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests

echo "==> Formatting (clang-format --dry-run)"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror

echo "==> Unit tests (cmocka, ASan+UBSan)"
# The index cache's server-bound unit test needs a real server: the one in
# MONGOGUARD_TEST_UPSTREAM, else a FerretDB started here for the unit run.
if [ -n "${MONGOGUARD_TEST_UPSTREAM:-}" ]; then
  unit_uri=$MONGOGUARD_TEST_UPSTREAM
else
  port=$(build/venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  data=$(mktemp -d "$PWD/build/unit-ferretdb.XXXXXX")
  build/tools/ferretdb --handler=sqlite --sqlite-url="file:$data/" --state-dir="$data" \
    --listen-addr="127.0.0.1:$port" --telemetry=disable --debug-addr=- --log-level=warn \
    >"$data/ferretdb.log" 2>&1 &
  ferret=$!
  trap 'kill $ferret 2>/dev/null || true; rm -rf "$data"' EXIT
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  unit_uri="mongodb://127.0.0.1:$port/"
fi
(cd build-asan && MG_TEST_UPSTREAM_URI=$unit_uri ctest --output-on-failure)

# The integration suite runs twice: against the release binary users run,
# and against the ASan+UBSan binary, where a memory error makes mongoguard
# exit non-zero and the suite's shutdown check fail.
if [ -n "${MONGOGUARD_BIN:-}" ]; then
  bins=("$MONGOGUARD_BIN")
else
  bins=("$PWD/build/mongoguard" "$PWD/build-asan/mongoguard")
fi
for bin in "${bins[@]}"; do
  echo "==> Integration tests through $bin"
  MONGOGUARD_BIN=$bin build/venv/bin/python -m pytest tests/integration -q -p no:cacheprovider "$@"
done
