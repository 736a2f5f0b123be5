#!/usr/bin/env bash
# `make run`: doclog with embedded defaults on this machine. It installs what
# is missing (Debian's postgresql, which `doclog dev` initialises and starts
# itself), builds the binaries and runs `doclog dev`: every role in one
# process, an in-process Kafka, the local Postgres, data kept between runs in
# DOCLOG_DATA_DIR, which doclog dev reads (default: doclog/dev under the
# user's cache directory). It listens on 127.0.0.1 only, prints the URLs and a
# first curl; Ctrl-C stops it. Set DATABASE_URL to use another Postgres,
# CLICKHOUSE_URL to add analytics; arguments go to doclog dev.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v go >/dev/null || { echo "run.sh: Go 1.26 or newer is required (go not found on PATH)" >&2; exit 1; }

if [ -z "${DATABASE_URL:-}" ]; then
	scripts/pg.sh install
fi
mkdir -p bin
go build -o bin/ ./cmd/doclog ./cmd/doclogctl
exec bin/doclog dev "$@"
