#!/usr/bin/env bash
# `make run`: starts what doclog has so far on this machine, installing what
# is missing. Today that is the operation log: a local Postgres (data kept in
# DOCLOG_DATA_DIR, default under the system temp dir), the schema migrations
# applied by `doclog migrate`, and a report of the schema. The pipeline roles
# replace this with `doclog dev` when they land.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v go >/dev/null || { echo "run.sh: Go 1.26 or newer is required (go not found on PATH)" >&2; exit 1; }

data=${DOCLOG_DATA_DIR:-${TMPDIR:-/tmp}/doclog-run}
mkdir -p "$data"
chmod 755 "$data"
scripts/pg.sh install
scripts/pg.sh stop "$data/pg" >/dev/null 2>&1 || true
url=$(scripts/pg.sh start "$data/pg")
url=${url#DATABASE_URL=}
trap 'scripts/pg.sh stop "$data/pg"' EXIT

mkdir -p bin
go build -o bin/doclog ./cmd/doclog
echo "== Postgres at $url (data in $data/pg)"
echo "== doclog migrate"
bin/doclog migrate --database-url "$url"
echo "== schema"
psql "$url" -X -q -c '\dt+' -c '\d operations'
echo "== done; the pipeline roles (ingest, executor, projectors, readstore) are not built yet"
