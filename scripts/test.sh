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
(cd build-asan && ctest --output-on-failure)

echo "==> Integration tests"
MONGOGUARD_BIN=${MONGOGUARD_BIN:-$PWD/build/mongoguard} \
  build/venv/bin/python -m pytest tests/integration -q "$@"
