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
# shellcheck source-path=SCRIPTDIR/..
. scripts/lib.sh
new_work bench-rebuild
trap stop_services EXIT
use_services "${TEST_DATABASE_URL:-}" "${TEST_KAFKA_SEEDS:-}"
export TEST_DATABASE_URL=$db TEST_KAFKA_SEEDS=$seeds
export DOCLOG_BENCH_REBUILD_OPS=${OPS:-1000000}
[ "${COMPARE:-1}" = 0 ] || export DOCLOG_BENCH_REBUILD_COMPARE=1
echo "commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%M:%SZ), $DOCLOG_BENCH_REBUILD_OPS operations; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# With a profile, go test keeps the test binary: in the scratch directory,
# for pprof, not in the tree.
go test -run '^$' -bench BenchmarkRebuild -benchtime 1x -timeout 2h ${PROFILE:+-cpuprofile "$PROFILE" -o "$work/projectors.test"} ./projectors/
