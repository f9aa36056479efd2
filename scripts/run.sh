#!/usr/bin/env bash
# One command: install what is missing, build, start FerretDB (SQLite, data
# under build/) as the default upstream, and run mongoguard in front of it in
# the foreground. Ctrl-C stops both.
#
# Environment: MG_LISTEN (default 127.0.0.1:27018), MG_FERRETDB_PORT (27117),
# MG_CONFIG (default configs/staging.yaml). Extra arguments go to mongoguard,
# e.g. scripts/run.sh --upstream mongodb://db.example:27017 skips FerretDB.
set -euo pipefail
cd "$(dirname "$0")/.."
# libmongoc's per-process /dev/shm counters: see README, Logs
export MONGOC_DISABLE_SHM=1
scripts/setup.sh

listen=${MG_LISTEN:-127.0.0.1:27018}
config=${MG_CONFIG:-configs/staging.yaml}
args=(--config "$config" --listen "$listen" --log -)

if [[ " $* " != *" --upstream "* && " $* " != *" -u "* ]]; then
  port=${MG_FERRETDB_PORT:-27117}
  data=build/ferretdb-data
  mkdir -p "$data"
  build/tools/ferretdb --handler=sqlite --sqlite-url="file:$PWD/$data/" \
    --listen-addr="127.0.0.1:$port" --telemetry=disable --debug-addr=- \
    --state-dir="$PWD/$data" --log-level=warn >build/ferretdb.log 2>&1 &
  ferret=$!
  trap 'kill $ferret 2>/dev/null; wait $ferret 2>/dev/null' EXIT
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
    kill -0 $ferret 2>/dev/null || { cat build/ferretdb.log >&2; exit 1; }
    sleep 0.1
  done
  args+=(--upstream "mongodb://127.0.0.1:$port/")
  echo "FerretDB $(build/tools/ferretdb --version | sed -n 's/^version: //p') on 127.0.0.1:$port (data in $data, log in build/ferretdb.log)" >&2
fi

echo "mongoguard listening on $listen. Connect with:  mongodb://$listen/" >&2
build/mongoguard "${args[@]}" "$@" &
mg=$!
trap 'kill -TERM $mg 2>/dev/null; wait $mg; kill ${ferret:-} 2>/dev/null; wait' EXIT INT TERM
wait $mg
