#!/usr/bin/env bash
# `make bench-w1`: workload W1 fixed (DOCUMENTS × ACTIONS × ROUNDS, default
# 200 × 50 × 1 = 10,000 operations), run by the Powerhouse reactor and by
# doclog on the same Postgres server in one invocation, in each of MODES
# (default "single batch"), RUNS times (default 1), the two alternating.
#
# The reference: @powerhousedao/reactor at the version pinned in
# scripts/reference/package.json (and its lockfile), installed with `npm ci`
# into .cache/reference-reactor, driven by scripts/reference/w1.mjs, which
# says what it measures and why it is not the reactor's own harness. It runs
# in a database of its own on the server, created and dropped by the run.
# doclog: `doclogctl bench --embedded --baseline --rounds ROUNDS`, in a
# schema of its own on the same server.
#
# Services: with DATABASE_URL and KAFKA_SEEDS set, those (the Postgres
# server of DATABASE_URL, whose user may create databases); otherwise a
# throwaway Postgres with fsync on and a single-node Kafka, stopped after.
# WARMUP (default 15s, 0 for none) is an unmeasured doclog run first, for
# the broker's JVM. Each run's JSON and summary.md (both figures and the
# ratio doclog/reactor per run) go to OUT (default
# .cache/bench-w1/<UTC time>).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source-path=SCRIPTDIR/..
. scripts/lib.sh
RUNS=${RUNS:-1}
MODES=${MODES:-single batch}
DOCUMENTS=${DOCUMENTS:-200}
ACTIONS=${ACTIONS:-50}
ROUNDS=${ROUNDS:-1}
OUT=${OUT:-.cache/bench-w1/$(date -u +%Y%m%dT%H%M%SZ)}
ref=.cache/reference-reactor
new_work bench-w1
trap stop_services EXIT

command -v node >/dev/null || { echo "node not found: the reference reactor runs on Node.js" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq not found: the summary needs it" >&2; exit 1; }

# Install the reference when its pinned files changed since the last install.
mkdir -p "$ref"
if ! cmp -s scripts/reference/package-lock.json "$ref/package-lock.json" || [ ! -d "$ref/node_modules" ]; then
	rm -rf "$ref/node_modules" "$ref/document-model-shim"
	cp -r scripts/reference/package.json scripts/reference/package-lock.json scripts/reference/document-model-shim "$ref/"
	(cd "$ref" && npm ci --no-audit --no-fund)
fi
cp scripts/reference/w1.mjs "$ref/w1.mjs"

use_services "${DATABASE_URL:-}" "${KAFKA_SEEDS:-}"
go build -o "$work/doclogctl" ./cmd/doclogctl
mkdir -p "$OUT"
{
	scripts/machine.sh "$db"
	echo "node: $(node --version)"
	echo "reactor: $(node -p "require('./$ref/node_modules/@powerhousedao/reactor/package.json').version")"
	echo "workload: W1 fixed, $DOCUMENTS documents × $ACTIONS actions × $ROUNDS round(s)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"

if [ "${WARMUP:-15s}" != 0 ]; then
	echo "== doclog warm-up for ${WARMUP:-15s}" >&2
	"$work/doclogctl" bench --embedded --mode single --duration "${WARMUP:-15s}" --database-url "$db" --kafka-seeds "$seeds" \
		--drain 2m -o json >/dev/null || echo "the warm-up did not drain" >&2
fi
for mode in $MODES; do
	for run in $(seq 1 "$RUNS"); do
		echo "== reactor, mode $mode, run $run of $RUNS; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		(cd "$ref" && node w1.mjs --database-url "$db" --mode "$mode" \
			--documents "$DOCUMENTS" --actions "$ACTIONS" --rounds "$ROUNDS") >"$OUT/reactor-$mode-$run.json" ||
			echo "the reactor's run $mode-$run did not finish cleanly; its report is kept" >&2
		echo "== doclog, mode $mode, run $run of $RUNS; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		"$work/doclogctl" bench --embedded --baseline --mode "$mode" --rounds "$ROUNDS" \
			--documents "$DOCUMENTS" --actions "$ACTIONS" --database-url "$db" --kafka-seeds "$seeds" \
			--drain 5m -o json >"$OUT/doclog-$mode-$run.json" || echo "doclog's run $mode-$run did not drain; its report is kept" >&2
	done
done

{
	cat "$OUT/machine.txt"
	echo
	echo "| mode | run | reactor ops/s to READ_READY | doclog ops/s to READ_READY | **doclog / reactor** | doclog / COPY | reactor p50 / p99 ms | doclog p50 / p99 ms |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
	for mode in $MODES; do
		for run in $(seq 1 "$RUNS"); do
			r=$OUT/reactor-$mode-$run.json d=$OUT/doclog-$mode-$run.json
			if ! jq -e .readReady.opsPerSec "$r" >/dev/null 2>&1 || ! jq -e .readReady.opsPerSec "$d" >/dev/null 2>&1; then
				echo "| $mode | $run | $(jq -r '.readReady.opsPerSec // "failed"' "$r" 2>/dev/null || echo failed) | $(jq -r '.readReady.opsPerSec // "failed"' "$d" 2>/dev/null || echo failed) | | | | |"
				continue
			fi
			jq -rn --slurpfile r "$r" --slurpfile d "$d" --arg mode "$mode" --arg run "$run" '
				($r[0].readReady) as $rr | ($d[0].readReady) as $dr |
				"| \($mode) | \($run) | \($rr.opsPerSec | round) (\($rr.operations) ops, \($r[0].failed) jobs failed) | \($dr.opsPerSec | round) (\($dr.operations) ops, \($d[0].failed) jobs failed) | **\(($dr.opsPerSec / $rr.opsPerSec * 10 | round) / 10)** | \(($d[0].baseline.ratioReadReady // 0) * 1000 | round / 1000) | \($rr.latencyP50Ms | round) / \($rr.latencyP99Ms | round) | \($dr.latencyP50Ms | round) / \($dr.latencyP99Ms | round) |"'
		done
	done
} >"$OUT/summary.md"
cat "$OUT/summary.md"
echo "reports in $OUT" >&2
