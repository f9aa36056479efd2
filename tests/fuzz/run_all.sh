#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz/fuzz_*.c, built in build-fuzz with
# clang and -DMG_FUZZ=ON) for a given number of seconds each, one at a time,
# under nice -n 19, each in a copy of its seed corpus, and prints a table:
# target, executions, seconds, exec/s, coverage (libFuzzer's cov: and ft:),
# crashes. Exits non-zero if any target found a crash, a leak, a timeout or
# ran out of memory.
#
#   tests/fuzz/run_all.sh SECONDS [TARGET...]
#       a long run. The working corpus of each target is kept in
#       build-fuzz/fuzz-work/<target>/corpus and grows across runs; each
#       run's figures are appended to build-fuzz/fuzz-work/history.tsv
#       (so totals over many runs can be summed) and the table is written to
#       build-fuzz/fuzz-work/last-run.md. MG_FUZZ_WORK=DIR keeps them in DIR
#       instead: a second chain on the same build, on the other core.
#   tests/fuzz/run_all.sh --smoke SECONDS [TARGET...]
#       the CI smoke: a fresh copy of the seeds per target, SECONDS each;
#       fails on any crash, leak or timeout.
#
# TARGET is a name like fuzz_reply (default: all). Builds build-fuzz when it
# is missing (CC=clang) and brings it up to date otherwise. Needs clang;
# everything else is what the normal build needs. Inputs that crash are
# left in build-fuzz/fuzz-work/<target>/artifacts/ (reproduce with
# build-fuzz/<target> FILE); see tests/fuzz/README.md for what to do then.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${MG_FUZZ_BUILD:-$root/build-fuzz}
[[ $build == /* ]] || build=$PWD/$build # each target runs from its own work directory

usage() {
	echo "usage: $0 [--smoke] SECONDS [TARGET...]" >&2
	exit 2
}

smoke=0
if [[ ${1:-} == --smoke ]]; then
	smoke=1
	shift
fi
[[ $# -ge 1 && $1 =~ ^[0-9]+$ && $1 -gt 0 ]] || usage
secs=$1
shift

if ! command -v clang >/dev/null; then
	echo "run_all.sh: clang is needed to build the fuzz targets (apt-get install clang)" >&2
	exit 2
fi
if [[ ! -f $build/build.ninja ]]; then
	echo "run_all.sh: configuring $build (clang, MG_FUZZ=ON)" >&2
	CC=clang cmake -S "$root" -B "$build" -G Ninja -DMG_FUZZ=ON -DMG_TESTS=OFF \
		-DCMAKE_BUILD_TYPE=Debug >/dev/null
fi
nice -n 19 cmake --build "$build" >/dev/null

if [[ $# -gt 0 ]]; then
	targets=("$@")
else
	targets=()
	for src in "$here"/fuzz_*.c; do
		targets+=("$(basename "$src" .c)")
	done
fi

work=${MG_FUZZ_WORK:-$build/fuzz-work}
mkdir -p "$work"
if ((smoke)); then
	work=$(mktemp -d "${TMPDIR:-/tmp}/mg-fuzz-smoke.XXXXXX")
	trap 'rm -rf "$work"' EXIT
fi

dict_for() {
	case $1 in
	fuzz_config) echo "$here/config.dict" ;;
	fuzz_request | fuzz_bson_command | fuzz_rule_* | fuzz_late) echo "$here/mongo.dict" ;;
	fuzz_report_diff | fuzz_log_text | fuzz_findings_query) echo "$here/text.dict" ;;
	*) echo "" ;;
	esac
}

table="| target | executions | seconds | exec/s | cov | ft | corpus | crashes |"
table+=$'\n'"|---|---:|---:|---:|---:|---:|---:|---|"
failed=0
total_execs=0
for t in "${targets[@]}"; do
	bin=$build/$t
	if [[ ! -x $bin ]]; then
		echo "run_all.sh: no target $bin" >&2
		exit 2
	fi
	dir=$work/$t
	mkdir -p "$dir/corpus" "$dir/artifacts"
	# Seeds only: the crash-/timeout- regression inputs are replayed by
	# ctest, and some take seconds under this instrumented build.
	cp -n "$here/corpus/$t"/seed-* "$dir/corpus/" 2>/dev/null || true
	args=(-max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048
		-max_len=65536 -artifact_prefix="$dir/artifacts/")
	dict=$(dict_for "$t")
	[[ -n $dict ]] && args+=(-dict="$dict")
	log=$dir/last.log
	before=$(find "$dir/artifacts" -type f | wc -l)
	start=$(date +%s.%N)
	rc=0
	(cd "$dir" && nice -n 19 "$bin" "${args[@]}" corpus >"$log" 2>&1) || rc=$?
	end=$(date +%s.%N)
	after=$(find "$dir/artifacts" -type f | wc -l)
	elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
	execs=$(awk '/^stat::number_of_executed_units/ { print $2 }' "$log")
	execs=${execs:-0}
	rate=$(awk -v e="$execs" -v s="$elapsed" 'BEGIN { printf "%.0f", (s > 0 ? e / s : 0) }')
	# the last status line that reports coverage (DONE, or the line before
	# a crash)
	cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1 || true)
	c=$(awk '{ print $2 }' <<<"$cov")
	f=$(awk '{ print $4 }' <<<"$cov")
	n=$(awk '{ print $6 }' <<<"$cov")
	crashes=none
	if ((rc != 0)); then
		failed=1
		what=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer): [a-z -]+' "$log" ||
			grep -m1 -oE 'runtime error: .*' "$log" || echo "exit status $rc")
		crashes="$((after - before)) new ($what); see $log"
		echo "run_all.sh: $t FAILED: $what" >&2
		tail -40 "$log" >&2
	fi
	total_execs=$((total_execs + execs))
	table+=$'\n'"| $t | $execs | $elapsed | $rate | ${c:-?} | ${f:-?} | ${n:-?} | $crashes |"
	if ((!smoke)); then
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$execs" \
			"$elapsed" "${c:-}" "${f:-}" "${n:-}" "$rc" >>"$work/history.tsv"
	fi
done
table+=$'\n'"| total | $total_execs | | | | | | |"

echo "$table"
if ((!smoke)); then
	{
		echo "$(date -u +%F\ %H:%M) UTC: tests/fuzz/run_all.sh $secs ${*:-}"
		echo
		echo "$table"
	} >"$work/last-run.md"
fi
exit $failed
