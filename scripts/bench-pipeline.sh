#!/usr/bin/env bash
# `make bench-pipeline`: the pipeline benchmark of docs/benchmarks.md. Starts a
# throwaway Postgres with fsync on and a single-node Kafka, runs
# `doclogctl bench --embedded --baseline` RUNS times (default 3, for medians)
# in each of MODES (default "single batch") for DURATION (default 30s), and
# stops both services. Each run's JSON report and a summary of the medians
# (of the figures, and of the legs of READ_READY)
# go to OUT (default .cache/bench-pipeline/<UTC time>); EXTRA adds flags to
# every run (e.g. EXTRA="--rate 2000" for an open loop).
#
# SEPARATE=1 runs the roles as separate processes instead of --embedded:
# for each run, `doclog serve --roles=ingest`, `--roles=executor` and
# `--roles=projectors` start on a fresh topics prefix, the bench drives
# them through the ingest API and reports each process's peak RSS (the
# executor's own, for the executor's RSS target), and the three stop after it.
# Their logs go to OUT/<mode>-<run>-<role>.log. Every run reports the CPU
# time per operation of each process on this host (the bench, each role
# with SEPARATE=1, Postgres, the broker): a summary table of it too.
#
# HALF_PEAK=1 measures the latency target as it is stated (p99 to READ_READY
# at half the peak rate): after the closed-loop runs of mode single, RUNS
# open-loop runs at half their median operations/s to READ_READY (halfpeak-<run>.json, a row of its own
# in the summary). `make bench-latency` runs just that.
#
# Back-to-back comparisons, on the same services, alternating: BUILDS is a
# list of commits, each built from `git archive` (default: the work tree
# alone); VARIANTS a ';'-separated list of flag sets, e.g.
# VARIANTS="--jobs-per-request 1;--jobs-per-request 20". Every run goes
# through each build with each variant in turn, its report
# <mode>@<commit>+v<k>-<run>.json, and the summary has a row for each.
#
# WARMUP (default 15s, 0 for none) is an unmeasured run of mode single before
# the measured ones (before each with SEPARATE=1): a fresh broker's JVM
# compiles its hot paths during its first seconds of load, and a first run
# measured cold came out at half the throughput of the next two.
#
# Measure on a quiet machine: the figures mean nothing while other work
# competes for the cores. The script prints the load average before each run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source-path=SCRIPTDIR/..
. scripts/lib.sh
if [ "${HALF_PEAK:-}" = 1 ] && { [ "${SEPARATE:-}" = 1 ] || [ -n "${EXTRA:-}${BUILDS:-}${VARIANTS:-}" ] || [[ " ${MODES:-single batch} " != *" single "* ]]; }; then
	echo "HALF_PEAK=1 needs mode single among MODES, embedded roles (no SEPARATE) and no EXTRA, BUILDS or VARIANTS: it sets the rate itself" >&2
	exit 2
fi
RUNS=${RUNS:-3}
MODES=${MODES:-single batch}
DURATION=${DURATION:-30s}
EXTRA=${EXTRA:-}
OUT=${OUT:-.cache/bench-pipeline/$(date -u +%Y%m%dT%H%M%SZ)}
new_work bench-pipeline
# Roles of a SEPARATE=1 run that an error left running are stopped too.
trap 'stop_roles || true; stop_services' EXIT

start_postgres
# Statements per operation come from pg_stat_statements.
if command -v psql >/dev/null; then
	preload_pg_stat_statements
else
	echo "psql not found: statements per operation will be unknown" >&2
fi
start_kafka
# builds: "." is the work tree, built into $work; a commit is built from
# its archive into $work/build-<commit>.
read -r -a builds <<<"${BUILDS:-.}"
variants=()
IFS=';' read -r -a variants <<<"${VARIANTS:-}"
[ ${#variants[@]} -gt 0 ] || variants=("")
build_dir() { if [ "$1" = . ]; then echo "$work"; else echo "$work/build-$1"; fi; }
for rev in "${builds[@]}"; do
	if [ "$rev" = . ]; then
		go build -o "$work/doclogctl" ./cmd/doclogctl
		go build -o "$work/doclog" ./cmd/doclog
		continue
	fi
	dir=$(build_dir "$rev")
	mkdir -p "$dir/src"
	git archive "$rev" | tar -x -C "$dir/src"
	(cd "$dir/src" && go build -o "$dir/doclogctl" ./cmd/doclogctl && go build -o "$dir/doclog" ./cmd/doclog)
done
# label REV K: the suffix of a run's name for build REV and variant K.
label() {
	local l=""
	[ ${#builds[@]} -gt 1 ] && l+="@$1"
	[ ${#variants[@]} -gt 1 ] && l+="+v$(($2 + 1))"
	echo "$l"
}
bin=$(build_dir "${builds[0]}")
mkdir -p "$OUT"
{
	scripts/machine.sh
	[ -z "${BUILDS:-}${VARIANTS:-}" ] || echo "builds: ${BUILDS:-the work tree}; variants: ${VARIANTS:-none}"
	echo "roles: $([ "${SEPARATE:-}" = 1 ] && echo "separate processes" || echo "embedded")"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"

# run_separate MODE NAME FLAGS: one run against the roles as three
# processes of $bin, its report OUT/NAME.json.
run_separate() {
	local mode=$1 name=$2 flags=$3 prefix="bench-$2-$$."
	prefix=${prefix//[^A-Za-z0-9._-]/_}
	start_roles "$bin/doclog" "$prefix" 18080 19090 "$OUT/$name-"
	warm_up --ingest-url http://127.0.0.1:18081 --topics-prefix "$prefix"
	# shellcheck disable=SC2086 # flags is a list of flags
	"$bin/doclogctl" bench --baseline --mode "$mode" --duration "$DURATION" \
		--ingest-url http://127.0.0.1:18081 --database-url "$db" --kafka-seeds "$seeds" --topics-prefix "$prefix" \
		--drain 5m -o json $flags >"$OUT/$name.json" || echo "run $name did not drain; its report is kept" >&2
	stop_roles
}

# warm_up [ARGS...]: an unmeasured run, its report discarded.
warm_up() {
	[ "${WARMUP:-15s}" = 0 ] && return 0
	echo "== warm-up for ${WARMUP:-15s}" >&2
	"$bin/doclogctl" bench --mode single --duration "${WARMUP:-15s}" --database-url "$db" --kafka-seeds "$seeds" \
		--drain 2m -o json "$@" >/dev/null || echo "the warm-up did not drain" >&2
}

[ "${SEPARATE:-}" = 1 ] || warm_up --embedded
for mode in $MODES; do
	for run in $(seq 1 "$RUNS"); do
		echo "== mode $mode, run $run of $RUNS; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		for rev in "${builds[@]}"; do
			for k in "${!variants[@]}"; do
				bin=$(build_dir "$rev")
				name="$mode$(label "$rev" "$k")-$run"
				flags="${variants[$k]} $EXTRA"
				[ -n "$(label "$rev" "$k")" ] && echo "== $name: build $rev, flags: $flags" >&2
				if [ "${SEPARATE:-}" = 1 ]; then
					run_separate "$mode" "$name" "$flags"
					continue
				fi
				# shellcheck disable=SC2086 # flags is a list of flags
				"$bin/doclogctl" bench --embedded --baseline --mode "$mode" --duration "$DURATION" \
					--database-url "$db" --kafka-seeds "$seeds" --drain 5m -o json $flags \
					>"$OUT/$name.json" || echo "run $name did not drain; its report is kept" >&2
			done
		done
	done
done

summary_modes=""
for mode in $MODES; do
	for rev in "${builds[@]}"; do
		for k in "${!variants[@]}"; do
			summary_modes+=" $mode$(label "$rev" "$k")"
		done
	done
done
if [ "${HALF_PEAK:-}" = 1 ]; then
	peak=$(jq -s 'map(.readReady.opsPerSec) | sort | .[(length / 2 | floor)]' "$OUT"/single-*.json)
	rate=$(jq -n --argjson p "$peak" '$p / 2 | round')
	echo "== half the closed-loop single median ($peak ops/s): open loop at $rate ops/s" >&2
	for run in $(seq 1 "$RUNS"); do
		echo "== half peak, run $run of $RUNS; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		"$work/doclogctl" bench --embedded --baseline --mode single --rate "$rate" --duration "$DURATION" \
			--database-url "$db" --kafka-seeds "$seeds" --drain 5m -o json \
			>"$OUT/halfpeak-$run.json" || echo "run halfpeak-$run did not drain; its report is kept" >&2
	done
	summary_modes+=" halfpeak"
fi

# Medians per mode, one row each, as docs/benchmarks.md tabulates them.
# per_mode ROW: the jq expression ROW over each mode's reports, with
# median(f) and $mode defined.
per_mode() {
	local mode
	for mode in $summary_modes; do
		jq -rs --arg mode "$mode" "def median(f): map(f) | sort | .[(length / 2 | floor)]; $1" "$OUT/$mode"-*.json
	done
}
if command -v jq >/dev/null; then
	{
		echo "| mode | ops/s WRITE_READY | ops/s READ_READY | COPY rows/s | ratio READ_READY/COPY | p50 / p99 ms READ_READY | transactions/op | statements/op | peak RSS MiB |"
		echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
		per_mode '
				"| \($mode) | \(median(.writeReady.opsPerSec) | round) | \(median(.readReady.opsPerSec) | round)"
				+ " | \(median(.baseline.rowsPerSec) | round) | \(median(.baseline.ratioReadReady) * 1000 | round / 1000)"
				+ " | \(median(.readReady.latencyP50Ms) | round) / \(median(.readReady.latencyP99Ms) | round)"
				+ " | \(median(.postgres.transactionsPerOp) * 100 | round / 100)"
				+ " | \(median(.postgres.statementsPerOp // -1) * 100 | round / 100)"
				+ " | \([.[].peakRss[]] | group_by(.name)
					| map("\(.[0].name | sub("^doclog serve "; "")): \(median(.peakBytes / 1048576) | round)")
					| join("; ")) |"'
		echo
		echo "Legs of READ_READY, medians over the runs (mean / p99 ms):"
		echo
		echo "| mode | submit | executor wait | append and announce | projection |"
		echo "| --- | --- | --- | --- | --- |"
		per_mode '
				[range(0; 4) as $i | "\(median(.legs[$i].meanMs // 0) | round) / \(median(.legs[$i].p99Ms // 0) | round)"]
				| "| \($mode) | " + join(" | ") + " |"'
		echo
		echo "CPU per operation, medians over the runs (µs of CPU time, user and system, per operation submitted; the processes on this host):"
		echo
		echo "| mode | all | by process |"
		echo "| --- | --- | --- |"
		per_mode '
				"| \($mode) | \(median(.cpu.microsPerOp // 0) | round) | \([.[].cpu.processes[]?] | group_by(.name)
					| map("\(.[0].name): \(median(.microsPerOp) | round)") | join("; ")) |"'
	} | tee "$OUT/summary.md"
else
	echo "jq is not installed: the per-run reports are in $OUT" >&2
fi
echo "reports in $OUT" >&2
