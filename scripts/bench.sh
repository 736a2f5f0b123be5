#!/usr/bin/env bash
# `make bench`: Go benchmarks against a throwaway Postgres with fsync on, as
# docs/benchmarks.md reports them. BENCHTIME (default 5s) and COUNT (default
# 3, for medians) tune the run; BENCH selects benchmarks (default all).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/doclog-bench.XXXXXX")
chmod 755 "$work"
trap 'scripts/pg.sh stop "$work/pg" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
scripts/pg.sh install
pg=$(scripts/pg.sh start "$work/pg" fsync)
export TEST_DATABASE_URL=${pg#DATABASE_URL=}
go test -run '^$' -bench "${BENCH:-.}" -benchtime "${BENCHTIME:-5s}" -count "${COUNT:-3}" ./...
