#!/usr/bin/env bash
# The machine a benchmark ran on, as the lines the benchmark drivers put at
# the top of their machine.txt: date, CPU, OS and Go, memory, Postgres (with
# fsync on, as they run it) and the commit.
set -euo pipefail
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "cpu: $(nproc) × $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
echo "os: $(. /etc/os-release && echo "$PRETTY_NAME"), $(go version | cut -d' ' -f3-)"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "postgres: $(psql --version 2>/dev/null || ls -d /usr/lib/postgresql/*/ | head -n1), fsync on"
echo "commit: $(git rev-parse --short HEAD)"
