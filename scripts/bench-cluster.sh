#!/usr/bin/env bash
# `make bench-cluster`: the pipeline benchmark of docs/benchmarks.md against a
# realistic topology, beside the loopback one in the same invocation, so the
# ratio of the two is measured within one run.
#
#   loopback  the single-node Kafka and the Postgres of `make bench-pipeline`
#             (fsync on), reached directly
#   cluster   three Kafka nodes (scripts/kafka.sh start-cluster: replication
#             factor 3, min.insync.replicas 2, producers at acks=all) and the
#             same Postgres, every connection through a TCP proxy that adds
#             LATENCY (default 1ms) each way (internal/latencyproxy): the
#             roles to the brokers and to Postgres, the brokers to each other,
#             the controllers' quorum. The brokers advertise the proxied
#             addresses, so no client reaches a partition leader around it.
#
# After an unmeasured warm-up of each (WARMUP, default 15s), it runs
# `doclogctl bench --embedded --baseline` RUNS times (default 2) in each of
# MODES (default "single batch") on each topology for DURATION (default 20s),
# alternating the two (loopback first in odd rounds, cluster first in even
# ones) so a drift of the machine's load falls on both. With HALF_PEAK=1
# (default) it then runs RUNS open-loop runs of mode single on the cluster at
# half its closed-loop single median, for the latency target. EXTRA adds
# flags to every run (e.g. EXTRA="--partitions 8").
#
# Each run's JSON report, the CPU seconds each process used over the run
# (cpu-<run>.json: the bench process with every role, Kafka, Postgres, the
# proxies), the machine and a summary (summary.md: per mode the median
# of each topology and the ratio cluster/loopback of each round's pair) go to
# OUT (default .cache/bench-cluster/<UTC time>). Three Kafka JVMs of
# KAFKA_HEAP (default 512m) each run beside the single node's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source-path=SCRIPTDIR/..
. scripts/lib.sh
RUNS=${RUNS:-2}
MODES=${MODES:-single batch}
DURATION=${DURATION:-20s}
LATENCY=${LATENCY:-1ms}
EXTRA=${EXTRA:-}
HALF_PEAK=${HALF_PEAK:-1}
OUT=${OUT:-.cache/bench-cluster/$(date -u +%Y%m%dT%H%M%SZ)}
command -v jq >/dev/null || { echo "bench-cluster: jq is needed for the summary: apt-get install jq" >&2; exit 2; }
[[ " $MODES " == *" single "* ]] || [ "$HALF_PEAK" != 1 ] || { echo "bench-cluster: HALF_PEAK=1 needs mode single among MODES" >&2; exit 2; }
new_work bench-cluster
cleanup() {
	# A proxy already gone must not stop the cleanup before the cluster.
	{ [ -f "$work/pgproxy.pid" ] && kill -TERM "$(cat "$work/pgproxy.pid")" 2>/dev/null; } || true
	scripts/kafka.sh stop-cluster "$work/cluster" >/dev/null 2>&1 || true
	stop_services
}
trap cleanup EXIT
fail() {
	echo "bench-cluster: $*" >&2
	exit 1
}

start_postgres || fail "Postgres did not start"
if command -v psql >/dev/null; then
	preload_pg_stat_statements || fail "Postgres did not restart with pg_stat_statements"
fi
# JVMs start slowly on busy cores: as long a wait for the single node as for
# the cluster.
KAFKA_READY_TIMEOUT=300s start_kafka || fail "the single Kafka node did not start"
cseeds=$(KAFKA_LINK_LATENCY=$LATENCY scripts/kafka.sh start-cluster "$work/cluster") || fail "the Kafka cluster did not start; its logs were printed above"
cseeds=${cseeds#TEST_KAFKA_SEEDS=}

# Postgres behind a link of its own: the same database, another port.
go build -o "$work/latencyproxy" ./internal/latencyproxy
pgport=$(cat "$work/pg/port")
pgproxy=$((pgport + 1))
while (exec 3<>"/dev/tcp/127.0.0.1/$pgproxy") 2>/dev/null; do pgproxy=$((pgproxy + 1)); done
"$work/latencyproxy" -latency "$LATENCY" -ready "$work/pgproxy.ready" -link "127.0.0.1:$pgproxy=127.0.0.1:$pgport" \
	</dev/null >"$work/pgproxy.log" 2>&1 &
echo $! >"$work/pgproxy.pid"
for _ in $(seq 1 100); do
	[ -f "$work/pgproxy.ready" ] && break
	sleep 0.1
done
[ -f "$work/pgproxy.ready" ] || { cat "$work/pgproxy.log" >&2; fail "the Postgres link did not start"; }
cdb=${db/127.0.0.1:$pgport/127.0.0.1:$pgproxy}
[ "$cdb" != "$db" ] || fail "could not point the database URL at the link: $db"

go build -o "$work/doclogctl" ./cmd/doclogctl
mkdir -p "$OUT"
{
	scripts/machine.sh
	echo "loopback: Kafka single node, Postgres direct"
	echo "cluster: Kafka 3 nodes (replication 3, min.insync.replicas 2), every link $LATENCY each way"
	echo "runs: $RUNS per mode and topology, $DURATION each, modes $MODES${EXTRA:+, extra flags $EXTRA}"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"

# ticks PIDS...: user and system clock ticks the processes used so far.
ticks() {
	local p t=0
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
	done
	echo "$t"
}
# pg_ticks: Postgres's ticks so far, the backends that exited included (the
# postmaster reaped them, so theirs count among its children's).
pg_ticks() {
	local pm
	pm=$(head -n1 "$work/pg/data/postmaster.pid")
	# shellcheck disable=SC2046 # a list of pids
	echo $(($(awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat") + $(ticks $(pgrep -P "$pm"))))
}
# child_ticks: ticks of this shell's children that were waited for (the
# bench process of each run). Not in a command substitution: a subshell's
# times are its own.
child_ticks() {
	times >"$work/times"
	sed -n 2p "$work/times" | awk -v hz="$(getconf CLK_TCK)" '{
		t = 0
		for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
		printf "%d\n", t * hz
	}'
}
kafka_pid=$(cat "$work/kafka/kafka.pid")
cluster_pids=$(cat "$work"/cluster/node*/kafka.pid | tr '\n' ' ')
proxy_pids="$(cat "$work/cluster/latencyproxy.pid") $(cat "$work/pgproxy.pid")"

# bench TOPOLOGY NAME ARGS...: one run, its report in OUT/NAME.json and the
# CPU seconds of each process over it in OUT/cpu-NAME.json.
bench() {
	local topo=$1 name=$2 url=$db ks=$seeds
	shift 2
	if [ "$topo" = cluster ]; then url=$cdb ks=$cseeds; fi
	local hz t0 t1 t2 t3 t4 started
	hz=$(getconf CLK_TCK)
	# shellcheck disable=SC2086 # lists of pids
	t0=$(pg_ticks) t1=$(ticks $kafka_pid) t2=$(ticks $cluster_pids) t3=$(ticks $proxy_pids)
	child_ticks >"$work/t4"
	t4=$(cat "$work/t4")
	started=$(date +%s%N)
	echo "== $topo, $name; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	# shellcheck disable=SC2086 # EXTRA is a list of flags
	"$work/doclogctl" bench --embedded --baseline --duration "$DURATION" --database-url "$url" --kafka-seeds "$ks" \
		--drain 5m -o json "$@" $EXTRA >"$OUT/$name.json" || echo "run $name did not drain; its report is kept" >&2
	child_ticks >"$work/t5"
	# shellcheck disable=SC2086
	jq -n --arg topo "$topo" --argjson hz "$hz" --argjson wall "$((($(date +%s%N) - started) / 1000000))" \
		--argjson pg "$(($(pg_ticks) - t0))" --argjson kafka "$(($(ticks $kafka_pid) - t1))" \
		--argjson cluster "$(($(ticks $cluster_pids) - t2))" --argjson proxies "$(($(ticks $proxy_pids) - t3))" \
		--argjson bench "$(($(cat "$work/t5") - t4))" \
		'{topology: $topo, wallSeconds: ($wall / 1000), cpuSeconds: {bench: ($bench / $hz), postgres: ($pg / $hz),
		  kafkaSingle: ($kafka / $hz), kafkaCluster: ($cluster / $hz), proxies: ($proxies / $hz)}}' >"$OUT/cpu-$name.json"
}

# The median of an even count is the mean of the middle two.
median='def median(f): map(f) | sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;'

if [ "${WARMUP:-15s}" != 0 ]; then
	for topo in loopback cluster; do
		DURATION=${WARMUP:-15s} bench "$topo" "warmup-$topo" --mode single
	done
fi
for mode in $MODES; do
	for run in $(seq 1 "$RUNS"); do
		order="loopback cluster"
		[ $((run % 2)) = 0 ] && order="cluster loopback"
		for topo in $order; do
			bench "$topo" "$mode-$topo-$run" --mode "$mode"
		done
	done
done
if [ "$HALF_PEAK" = 1 ]; then
	peak=$(jq -s "$median"' median(.readReady.opsPerSec)' "$OUT"/single-cluster-*.json)
	rate=$(jq -n --argjson p "$peak" '$p / 2 | round')
	echo "== half the cluster's closed-loop single median ($peak ops/s): open loop at $rate ops/s" >&2
	for run in $(seq 1 "$RUNS"); do
		bench cluster "halfpeak-cluster-$run" --mode single --rate "$rate"
	done
fi

{
	echo "| mode | topology | ops/s READ_READY (runs) | median | ratio READ_READY/COPY (median) | p50 / p99 ms READ_READY (median) | statements/op | CPU s per run: bench process, its Kafka, Postgres, proxies |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
	rows="$MODES"
	[ "$HALF_PEAK" = 1 ] && rows+=" halfpeak"
	for mode in $rows; do
		for topo in loopback cluster; do
			ls "$OUT/$mode-$topo"-*.json >/dev/null 2>&1 || continue
			jq -rs --arg mode "$mode" --arg topo "$topo" "$median"'
				"| \($mode) | \($topo) | \(map(.readReady.opsPerSec | round) | join(", ")) | \(median(.readReady.opsPerSec) | round)"
				+ " | \(median(.baseline.ratioReadReady) * 1000 | round / 1000)"
				+ " | \(median(.readReady.latencyP50Ms) | round) / \(median(.readReady.latencyP99Ms) | round)"
				+ " | \(median(.postgres.statementsPerOp // -1) * 100 | round / 100)"' "$OUT/$mode-$topo"-*.json |
				tr -d '\n'
			jq -rs "$median"'
				" | \(median(.cpuSeconds.bench) * 10 | round / 10), \(median(if .topology == "cluster" then .cpuSeconds.kafkaCluster else .cpuSeconds.kafkaSingle end) * 10 | round / 10),"
				+ " \(median(.cpuSeconds.postgres) * 10 | round / 10), \(median(.cpuSeconds.proxies) * 10 | round / 10) |"' \
				"$OUT/cpu-$mode-$topo"-*.json
		done
	done
	echo
	echo "Cluster over loopback, operations/s to READ_READY, each round's pair (and of the ratios to COPY):"
	echo
	echo "| mode | rounds: ops/s ratio (COPY-ratio ratio) | median |"
	echo "| --- | --- | --- |"
	for mode in $MODES; do
		for run in $(seq 1 "$RUNS"); do
			jq -n --slurpfile l "$OUT/$mode-loopback-$run.json" --slurpfile c "$OUT/$mode-cluster-$run.json" \
				'[($c[0].readReady.opsPerSec / $l[0].readReady.opsPerSec), ($c[0].baseline.ratioReadReady / $l[0].baseline.ratioReadReady)]'
		done | jq -rs --arg mode "$mode" "$median"'
			"| \($mode) | \(map("\(.[0] * 100 | round / 100) (\(.[1] * 100 | round / 100))") | join(", "))"
			+ " | **\(median(.[0]) * 100 | round / 100)** (\(median(.[1]) * 100 | round / 100)) |"'
	done
	echo
	echo "Legs of READ_READY, medians over the runs (mean / p99 ms):"
	echo
	echo "| mode | topology | submit | executor wait | append and announce | projection |"
	echo "| --- | --- | --- | --- | --- | --- |"
	for mode in $rows; do
		for topo in loopback cluster; do
			ls "$OUT/$mode-$topo"-*.json >/dev/null 2>&1 || continue
			jq -rs --arg mode "$mode" --arg topo "$topo" "$median"'
				[range(0; 4) as $i | "\(median(.legs[$i].meanMs // 0) | round) / \(median(.legs[$i].p99Ms // 0) | round)"]
				| "| \($mode) | \($topo) | " + join(" | ") + " |"' "$OUT/$mode-$topo"-*.json
		done
	done
} | tee "$OUT/summary.md"
echo "reports in $OUT" >&2
