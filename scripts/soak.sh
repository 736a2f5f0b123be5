#!/usr/bin/env bash
# `make soak`: the soak of docs/benchmarks.md. Starts a throwaway Postgres
# with fsync on and a single-node Kafka, runs the roles as separate
# processes (`doclog serve --roles=ingest`, `executor`, `projectors`, so
# memory and CPU are per role), finds the peak with a short closed-loop run
# of mode single (PEAK_DURATION, default 30s) unless RATE (operations/s) is
# given, then runs the open loop at half the peak for DURATION (default
# 30m) with a time series row every INTERVAL (default 10s). soakreport then
# judges the series (first and last thirds after WARMUP, default 1m, flat
# within 10%; executor RSS at most 200 MiB) and draws it.
#
# Output in OUT (default .cache/soak/<UTC time>): series.csv, soak.png,
# verdict.md, the run's JSON report (soak.json), peak.json and the roles'
# logs. The exit status is soakreport's: 1 when a judged series is not flat
# or the executor's memory is over its limit.
#
# Measure on a quiet machine: on a shared one the other work shows up as
# noise in every series.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source-path=SCRIPTDIR/..
. scripts/lib.sh
DURATION=${DURATION:-30m}
INTERVAL=${INTERVAL:-10s}
WARMUP=${WARMUP:-1m}
PEAK_DURATION=${PEAK_DURATION:-30s}
RATE=${RATE:-}
OUT=${OUT:-.cache/soak/$(date -u +%Y%m%dT%H%M%SZ)}
new_work soak
cleanup() {
	stop_roles 2>/dev/null || true
	stop_services
}
trap cleanup EXIT

start_postgres
start_kafka
go build -o "$work/doclogctl" ./cmd/doclogctl
go build -o "$work/doclog" ./cmd/doclog
go build -o "$work/soakreport" ./cmd/soakreport
mkdir -p "$OUT"
{
	scripts/machine.sh
	echo "roles: separate processes"
	echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"

prefix="soak-$$."
# Ingest's backpressure is off: the soak holds a steady load to see
# whether anything grows, and refusals would shed the load a growing
# backlog shows as lag.
start_roles "$work/doclog" "$prefix" 18180 19190 "$OUT/" \
	DOCLOG_INGEST_MAX_EXECUTOR_LAG=-1s DOCLOG_INGEST_MAX_EXECUTOR_LAG_RECORDS=-1
bench=("$work/doclogctl" bench --mode single --ingest-url http://127.0.0.1:18181 --database-url "$db"
	--kafka-seeds "$seeds" --topics-prefix "$prefix" -o json)

# A fresh broker's JVM compiles its hot paths during its first seconds of
# load: an unmeasured run first.
echo "== warm-up for 15s" >&2
"${bench[@]}" --duration 15s --drain 2m >/dev/null || echo "the warm-up did not drain" >&2
if [ -z "$RATE" ]; then
	echo "== peak: closed loop for $PEAK_DURATION; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	"${bench[@]}" --duration "$PEAK_DURATION" --drain 5m >"$OUT/peak.json" || echo "the peak run did not drain" >&2
	peak=$(jq -e '.readReady.opsPerSec' "$OUT/peak.json") || { echo "the peak run gave no report; see $OUT" >&2; exit 2; }
	RATE=$(jq -n --argjson p "$peak" '$p / 2 | round')
	echo "== peak $peak operations/s to READ_READY: the soak runs at $RATE" >&2
fi
echo "== soak at $RATE operations/s for $DURATION, a row every $INTERVAL; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"${bench[@]}" --rate "$RATE" --duration "$DURATION" --drain 5m \
	--series "$OUT/series.csv" --series-interval "$INTERVAL" >"$OUT/soak.json" || echo "the soak did not drain; its report is kept" >&2
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
jq -r '"soak: \(.submitted.jobs) jobs acknowledged, \(.submitFailures) refused or failed, drained: \(.drained)"' \
	"$OUT/soak.json" | tee -a "$OUT/machine.txt" >&2 || echo "the soak gave no report; see $OUT" >&2
echo "rate: $RATE operations/s, duration $DURATION, interval $INTERVAL" >>"$OUT/machine.txt"
stop_roles

status=0
"$work/soakreport" --series "$OUT/series.csv" --png "$OUT/soak.png" --warmup "$WARMUP" \
	--title "Soak at $RATE ops/s for $DURATION" >"$OUT/verdict.md" || status=$?
cat "$OUT/verdict.md"
echo "series, plot and verdict in $OUT" >&2
exit "$status"
