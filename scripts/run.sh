#!/usr/bin/env bash
# One command: install what is missing, build, start FerretDB (SQLite, data
# under build/) as the default upstream, and run mongoguard in front of it in
# the foreground. Ctrl-C stops both; so does mongoguard exiting or failing
# to start: FerretDB never outlives this script.
#
# stdout is mongoguard's log alone, from its first line (scripts/run.sh |
# jq . works); the build, FerretDB's notes and the connection URI go to
# stderr. The URI is printed once mongoguard accepts connections.
#
# The children run in sessions of their own (setsid), so the terminal's
# Ctrl-C reaches this script alone, which stops each child once: mongoguard
# drains as after one SIGTERM, instead of taking the terminal's SIGINT and
# then this script's SIGTERM as a second signal that closes every
# connection at once. `timeout 20 scripts/run.sh` works the same way.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'USAGE'
Usage: scripts/run.sh [--config FILE] [MONGOGUARD OPTIONS...]
       scripts/run.sh --help

Installs what is missing, builds, starts FerretDB (SQLite, data in
build/ferretdb-data) on 127.0.0.1:27117 and mongoguard in front of it on
127.0.0.1:27018, in the foreground. Ctrl-C stops both (mongoguard drains
first). stdout is mongoguard's log; everything else goes to stderr.

  --config FILE        mongoguard's configuration (default configs/staging.yaml;
                       configs/capture.yaml records traffic for the report,
                       configs/production.yaml blocks what it must)
  --upstream URI       use your server instead: FerretDB is not started
  --help               this text; nothing is started

Other options go to mongoguard (build/mongoguard --help lists them).
The clients the README uses are installed too: build/bin/mongosh and
build/bin/python (pymongo).

Environment: MG_LISTEN (default 127.0.0.1:27018), MG_FERRETDB_PORT (27117),
MG_CONFIG (the default of --config), MG_FERRETDB_DATA (build/ferretdb-data).
MG_FERRETDB and MG_MONGOGUARD name prebuilt binaries to use instead of
build/tools/ferretdb and build/mongoguard; with both set, setup is skipped.
USAGE
}

config=${MG_CONFIG:-configs/staging.yaml}
upstream_given=0
pass=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --config|-c)
      [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a file" >&2; exit 2; }
      config=$2; shift 2 ;;
    --config=*) config=${1#--config=}; shift ;;
    --upstream|-u|--upstream=*) upstream_given=1; pass+=("$1"); shift ;;
    *) pass+=("$1"); shift ;;
  esac
done
[[ -r $config ]] || { echo "run.sh: cannot read the configuration $config" >&2; exit 2; }
# libmongoc's per-process /dev/shm counters: see README, Logs
export MONGOC_DISABLE_SHM=1

ferretdb_bin=${MG_FERRETDB:-build/tools/ferretdb}
mongoguard_bin=${MG_MONGOGUARD:-build/mongoguard}
if [[ -z ${MG_FERRETDB:-} || -z ${MG_MONGOGUARD:-} ]]; then
  scripts/setup.sh >&2
fi
mkdir -p build

listen=${MG_LISTEN:-127.0.0.1:27018}
args=(--config "$config" --listen "$listen" --log -)

# Both children are stopped on every way out: mongoguard first (it drains),
# then FerretDB.
ferret='' mg=''
cleanup() {
  trap - EXIT INT TERM
  if [[ -n $mg ]]; then
    kill -TERM "$mg" 2>/dev/null || true
    wait "$mg" 2>/dev/null || true
  fi
  if [[ -n $ferret ]]; then
    kill -TERM "$ferret" 2>/dev/null || true
    wait "$ferret" 2>/dev/null || true
  fi
}
trap 'status=$?; cleanup; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Does something accept connections at host:port?
answers() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

host=${listen%:*} port=${listen##*:}
host=${host#[} host=${host%]}
[[ -z $host || $host == 0.0.0.0 || $host == :: ]] && host=127.0.0.1
if answers "$host" "$port"; then
  echo "run.sh: $listen is in use already (MG_LISTEN sets another address)" >&2
  exit 1
fi

if [[ $upstream_given == 0 ]]; then
  fport=${MG_FERRETDB_PORT:-27117}
  # Something else answering there would be used silently in FerretDB's
  # place (another run.sh, a mongod): refuse instead.
  if answers 127.0.0.1 "$fport"; then
    echo "run.sh: 127.0.0.1:$fport already answers (another run.sh, FerretDB or mongod?)." >&2
    echo "run.sh: stop it, set MG_FERRETDB_PORT to a free port, or use that server with --upstream mongodb://127.0.0.1:$fport/" >&2
    exit 1
  fi
  data=${MG_FERRETDB_DATA:-build/ferretdb-data}
  mkdir -p "$data"
  data=$(cd "$data" && pwd)
  setsid "$ferretdb_bin" --handler=sqlite --sqlite-url="file:$data/" \
    --listen-addr="127.0.0.1:$fport" --telemetry=disable --debug-addr=- \
    --state-dir="$data" --log-level=warn >build/ferretdb.log 2>&1 &
  ferret=$!
  for _ in $(seq 100); do
    answers 127.0.0.1 "$fport" && break
    kill -0 "$ferret" 2>/dev/null || { cat build/ferretdb.log >&2; exit 1; }
    sleep 0.1
  done
  answers 127.0.0.1 "$fport" || { echo "run.sh: FerretDB did not start" >&2; exit 1; }
  args+=(--upstream "mongodb://127.0.0.1:$fport/")
  echo "FerretDB $("$ferretdb_bin" --version | sed -n 's/^version: //p') on 127.0.0.1:$fport (data in $data, log in build/ferretdb.log)" >&2
fi

setsid "$mongoguard_bin" "${args[@]}" "${pass[@]}" &
mg=$!
until answers "$host" "$port"; do
  if ! kill -0 "$mg" 2>/dev/null; then
    status=0
    wait "$mg" || status=$?
    mg=''
    echo "run.sh: mongoguard exited (status $status) before it listened" >&2
    exit $((status ? status : 1))
  fi
  sleep 0.05
done
echo "mongoguard listening on $listen. Connect with:  mongodb://$listen/" >&2
status=0
wait "$mg" || status=$?
mg=''
exit "$status"
