# Sourced (not run) by scripts/test.sh and scripts/memcheck.sh: the server
# the index cache's server-bound unit test talks to (MG_TEST_UPSTREAM_URI).
#
#   unit_upstream_start   exports MG_TEST_UPSTREAM_URI: kept if already set,
#                         else MONGOGUARD_TEST_UPSTREAM, else a FerretDB
#                         started here on a free loopback port, stopped and
#                         its data removed when the calling script exits.
#
# One function for both scripts so the unit runs under ASan and under
# valgrind talk to the same kind of server, started the same way.
unit_upstream_start() {
  if [ -n "${MG_TEST_UPSTREAM_URI:-}" ]; then
    return 0
  fi
  if [ -n "${MONGOGUARD_TEST_UPSTREAM:-}" ]; then
    export MG_TEST_UPSTREAM_URI=$MONGOGUARD_TEST_UPSTREAM
    return 0
  fi
  local port
  port=$(build/venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  unit_upstream_data=$(mktemp -d "$PWD/build/unit-ferretdb.XXXXXX")
  build/tools/ferretdb --handler=sqlite --sqlite-url="file:$unit_upstream_data/" \
    --state-dir="$unit_upstream_data" --listen-addr="127.0.0.1:$port" --telemetry=disable \
    --debug-addr=- --log-level=warn >"$unit_upstream_data/ferretdb.log" 2>&1 &
  unit_upstream_pid=$!
  trap 'kill $unit_upstream_pid 2>/dev/null || true; rm -rf "$unit_upstream_data"' EXIT
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
    sleep 0.1
  done
  export MG_TEST_UPSTREAM_URI="mongodb://127.0.0.1:$port/"
}
