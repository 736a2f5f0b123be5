#!/usr/bin/env bash
# `make bench-rebuild`: BenchmarkRebuild (projectors/rebuild_bench_test.go,
# docs/benchmarks.md "Rebuild"). Builds a log of OPS operations (default
# 1,000,000; fewer for a quick run), rebuilds the document view and the
# indexer from it, and times a raw COPY of the same operation rows and of
# the projection rows in the same run. COMPARE=1 (the default; 0 for none)
# first rebuilds the document view with one log read in flight at a time,
# for a before/after in one run. PROFILE=FILE writes a CPU profile.
#
# Services: with TEST_DATABASE_URL and TEST_KAFKA_SEEDS set, those;
# otherwise a throwaway Postgres with fsync on and a single-node Kafka,
# stopped after.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=$(mktemp -d -t doclog-bench-rebuild.XXXXXX)
chmod 755 "$work"
started=
cleanup() {
	if [ -n "$started" ]; then
		scripts/kafka.sh stop "$work/kafka" >/dev/null 2>&1 || true
		scripts/pg.sh stop "$work/pg" >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${TEST_DATABASE_URL:-}" ] || [ -z "${TEST_KAFKA_SEEDS:-}" ]; then
	started=1
	scripts/pg.sh install
	pg=$(scripts/pg.sh start "$work/pg" fsync)
	export TEST_DATABASE_URL=${pg#DATABASE_URL=}
	scripts/kafka.sh install
	seeds=$(scripts/kafka.sh start "$work/kafka")
	export TEST_KAFKA_SEEDS=${seeds#TEST_KAFKA_SEEDS=}
fi
export DOCLOG_BENCH_REBUILD_OPS=${OPS:-1000000}
[ "${COMPARE:-1}" = 0 ] || export DOCLOG_BENCH_REBUILD_COMPARE=1
echo "commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%M:%SZ), $DOCLOG_BENCH_REBUILD_OPS operations; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# With a profile, go test keeps the test binary: in the scratch directory,
# for pprof, not in the tree.
go test -run '^$' -bench BenchmarkRebuild -benchtime 1x -timeout 2h ${PROFILE:+-cpuprofile "$PROFILE" -o "$work/projectors.test"} ./projectors/
