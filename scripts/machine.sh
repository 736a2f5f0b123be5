#!/usr/bin/env bash
# The machine a benchmark ran on, as the lines the benchmark drivers put at
# the top of their machine.txt: date, CPU, OS and Go, memory, Postgres (with
# fsync on, as they run it) and the commit.
#
#   scripts/machine.sh [DATABASE_URL]
#
# With DATABASE_URL the Postgres line is that server's version and fsync
# setting, as it reports them: a server the caller brought may not be the
# local install's version, nor run with fsync on.
set -euo pipefail
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "cpu: $(nproc) × $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "os: $(. /etc/os-release && echo "$PRETTY_NAME"), $(go version | cut -d' ' -f3-)"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
if [ $# -gt 0 ]; then
	echo "postgres: $(psql "$1" -Atc 'SHOW server_version' 2>/dev/null || echo unknown), fsync $(psql "$1" -Atc 'SHOW fsync' 2>/dev/null || echo unknown)"
else
	echo "postgres: $(psql --version 2>/dev/null || ls -d /usr/lib/postgresql/*/ | head -n1), fsync on"
fi
echo "commit: $(git rev-parse --short HEAD)"
