#!/usr/bin/env bash
# Installs whatever is missing and builds. Idempotent: a second run only
# rebuilds what changed. Used by scripts/run.sh and scripts/test.sh.
#
#   scripts/setup.sh            system packages, FerretDB, build/mongoguard,
#                               and the clients the README's walkthroughs
#                               use: build/bin/mongosh and build/bin/python
#                               (pymongo, for scripts/sample_app.py)
#   scripts/setup.sh --tests    also valgrind and clang (libFuzzer), the
#                               tools the tests use, and the sanitizer
#                               builds in build-asan/ (ASan+UBSan) and
#                               build-tsan/ (ThreadSanitizer, the program
#                               only)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FERRETDB_VERSION=v1.24.2
with_tests=0
[ "${1:-}" = "--tests" ] && with_tests=1

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# ---- Debian packages --------------------------------------------------------
pkgs=(build-essential cmake ninja-build pkg-config clang-format
      libevent-dev libbson-dev libmongoc-dev libssl-dev libyaml-dev libcmocka-dev
      zlib1g-dev libsnappy-dev libzstd-dev ca-certificates)
command -v go >/dev/null 2>&1 || pkgs+=(golang-go)
# The walkthroughs' clients: mongosh (npm) and pymongo (a venv).
command -v node >/dev/null 2>&1 || pkgs+=(nodejs npm)
pkgs+=(python3-venv)
if [ $with_tests = 1 ]; then
  pkgs+=(haproxy prometheus systemd openssl)
  pkgs+=(chromium) # the HTML report test (headless)
  pkgs+=(valgrind) # scripts/memcheck.sh
  pkgs+=(strace)   # test_read_path.py counts mongoguard's system calls
  pkgs+=(busybox)  # test_deploy_configs.py runs the Kubernetes config reloader's loop
  # the fuzz smoke (tests/fuzz/run_all.sh): clang, and its runtime
  # libraries, where libFuzzer lives (only recommended by clang)
  pkgs+=(clang libclang-rt-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) || status=
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "Installing Debian packages: ${missing[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ---- FerretDB (the embedded default upstream) ------------------------------
# From the Go module proxy. The module's zip lacks build/version/version.txt,
# which FerretDB's own release task generates, and without it the binary that
# `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2` produces
# panics at start. So: download that same module version through the proxy,
# add the version file, and build it.
FERRETDB="$ROOT/build/tools/ferretdb"
# Not `ferretdb --version | grep -q`: grep -q exits at the first line, and a
# Go program writing the next ones to the closed pipe dies of SIGPIPE, which
# pipefail turns into this script's exit status (141).
ferretdb_ok() {
  local out
  out=$("$FERRETDB" --version 2>/dev/null) || return 1
  grep -qx "version: $FERRETDB_VERSION" <<<"$out"
}
if ! ferretdb_ok; then
  say "Installing FerretDB $FERRETDB_VERSION from the Go module proxy"
  export GOFLAGS=-mod=mod
  moddir=$(cd /tmp && go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" |
           sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$moddir" ] || { echo "setup: go mod download gave no module directory" >&2; exit 1; }
  src="$ROOT/build/tools/ferretdb-src"
  rm -rf "$src" && mkdir -p "$ROOT/build/tools" && cp -r "$moddir" "$src" && chmod -R u+w "$src"
  echo "$FERRETDB_VERSION" > "$src/build/version/version.txt"
  (cd "$src" && go build -o "$FERRETDB" ./cmd/ferretdb)
  ferretdb_ok || { echo "setup: $FERRETDB is not FerretDB $FERRETDB_VERSION" >&2; exit 1; }
fi

# ---- mongoguard -------------------------------------------------------------
say "Building build/mongoguard"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build

if [ $with_tests = 1 ]; then
  say "Building the sanitizer build in build-asan/"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMG_SANITIZE=ON >/dev/null
  cmake --build build-asan
  # TSan and ASan cannot share a binary. Only mongoguard itself: the
  # integration suite's multi-worker run is what goes through it.
  say "Building the ThreadSanitizer build in build-tsan/"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMG_TSAN=ON \
    -DMG_TESTS=OFF >/dev/null
  cmake --build build-tsan
fi

# ---- clients, pinned --------------------------------------------------------
# One set for the walkthroughs and the tests: pymongo and the test runner in
# build/venv, mongosh and the Node.js driver in tests/integration/node.
if [ ! -x build/venv/bin/python ] ||
   ! cmp -s tests/integration/requirements.txt build/venv/.requirements; then
  say "Installing Python clients (tests/integration/requirements.txt)"
  python3 -m venv build/venv
  build/venv/bin/pip install -q --disable-pip-version-check -r tests/integration/requirements.txt
  cp tests/integration/requirements.txt build/venv/.requirements
fi
if [ ! -d tests/integration/node/node_modules ] ||
   ! cmp -s tests/integration/node/package-lock.json tests/integration/node/node_modules/.package-lock.json.mg; then
  say "Installing Node.js clients and mongosh (tests/integration/node/package-lock.json)"
  (cd tests/integration/node && npm ci --no-audit --no-fund --loglevel=error)
  cp tests/integration/node/package-lock.json tests/integration/node/node_modules/.package-lock.json.mg
fi
# The names the README uses.
mkdir -p build/bin
ln -sfn ../../tests/integration/node/node_modules/.bin/mongosh build/bin/mongosh
# Not a symlink: a venv's python finds its packages from the path it was
# started by, which must be the venv's own.
rm -f build/bin/python
cat >build/bin/python <<'WRAPPER'
#!/bin/sh
exec "$(cd "$(dirname "$0")" && pwd -P)/../venv/bin/python" "$@"
WRAPPER
chmod +x build/bin/python
