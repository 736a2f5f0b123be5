#!/usr/bin/env bash
# The chaos run (docs/reliability.md): every doclog role as its own
# process on a Kafka, a Postgres (fsync on) and a ClickHouse of the run's own,
# under load with idempotency-key retries, through kill -9 of members and
# ingest, a broker kill and restart, a Postgres crash restart, a rebalance
# and two network cuts; then the drain, the acked-jobs ledger and
# `doclogctl verify`.
#
#   SEED=n             the seed of the faults and the load (default 1)
#   CHAOS_SEEDS="1 2"  run these seeds one after the other instead
#   CHAOS_PROFILE      full (default) or short (the go test's version)
#   CHAOS_FLAGS        more flags for the driver (internal/chaos/chaosrun),
#                      e.g. "-rate 200 -drain-limit 20s", or
#                      "-member-env DOCLOG_EXECUTOR_ASYNC_ANNOUNCE=true" to put
#                      a setting that is not the default through the faults
#   KEEP=1             keep the run directory even when every seed passed
#
# Exits non-zero when any seed failed. Whatever happens, every process a run
# started is stopped: the driver does it, and this script's trap again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seeds=${CHAOS_SEEDS:-${SEED:-1}}
profile=${CHAOS_PROFILE:-full}
work=$(mktemp -d "${TMPDIR:-/tmp}/doclog-chaos.XXXXXX")
chmod 755 "$work"
child=
summarised=

# stop_run ends whatever a run in DIR left: member process groups first, then
# the services (each script is a no-op when its service is not running).
stop_run() {
	local dir=$1 f pid
	for f in "$dir"/pids/*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		kill -KILL -- "-$pid" 2>/dev/null || true
	done
	scripts/kafka.sh stop "$dir/kafka" >/dev/null 2>&1 || true
	scripts/pg.sh stop "$dir/pg" >/dev/null 2>&1 || true
	scripts/clickhouse.sh stop "$dir/clickhouse" >/dev/null 2>&1 || true
}

# cleanup keeps the script's own exit status: its last test would be it.
cleanup() {
	local rc=$?
	if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
		kill -INT "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	for d in "$work"/seed-*; do
		if [ -d "$d" ]; then stop_run "$d"; fi
	done
	if [ "$rc" != 0 ] && [ -z "$summarised" ] && [ -d "$work" ]; then echo "logs kept in $work" >&2; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== installing what is missing" >&2
scripts/pg.sh install
scripts/kafka.sh install
scripts/clickhouse.sh install
go build -o "$work/chaosrun" ./internal/chaos/chaosrun

failed=()
for seed in $seeds; do
	dir=$work/seed-$seed
	echo "== seed $seed ($profile), in $dir" >&2
	set +e
	# shellcheck disable=SC2086
	"$work/chaosrun" -seed "$seed" -profile "$profile" -dir "$dir" ${CHAOS_FLAGS:-} >"$work/report-$seed.txt" &
	child=$!
	wait "$child"
	rc=$?
	child=
	set -e
	cat "$work/report-$seed.txt"
	stop_run "$dir"
	[ "$rc" = 0 ] || failed+=("$seed (exit $rc)")
	# The services' data is large and worthless after the report; the logs stay.
	rm -rf "$dir/kafka/data" "$dir/pg/data" "$dir/clickhouse/data" "$dir/bin"
done

summarised=1
echo
echo "== summary"
for seed in $seeds; do
	printf 'seed %s: %s\n' "$seed" "$(grep -h '^verdict:' "$work/report-$seed.txt" 2>/dev/null || echo 'no report')"
	grep -hE '^(acked|failed|lost|duplicated|divergent|drain):' "$work/report-$seed.txt" 2>/dev/null | sed 's/^/    /' || true
done
if [ ${#failed[@]} -gt 0 ] || [ "${KEEP:-}" = 1 ]; then
	echo "logs kept in $work"
else
	rm -rf "$work"
fi
if [ ${#failed[@]} -gt 0 ]; then
	echo "failed: ${failed[*]}" >&2
	exit 1
fi
