#!/usr/bin/env bash
# Runs doclog's tests against real services: it installs what is missing,
# starts a throwaway Postgres, a single-node Kafka and a ClickHouse server once,
# exports their addresses (TEST_DATABASE_URL, TEST_KAFKA_SEEDS,
# TEST_CLICKHOUSE_ADDR) and the path of schemathesis, which the API contract
# test runs (TEST_SCHEMATHESIS), runs `go test ./...` and the
# fuzz targets briefly, and stops the services whatever happens.
#
# For the tests of TLS it also writes throwaway certificates (scripts/certs.sh,
# TEST_TLS_CERTS), gives the broker a SASL_SSL listener and ClickHouse a TLS
# port, both asking for a client certificate (TEST_KAFKA_SECURE_SEEDS,
# TEST_KAFKA_SECURE_PASSWORD, TEST_CLICKHOUSE_TLS_ADDR), and starts a second
# Postgres that takes TLS with a password only (TEST_DATABASE_TLS_URL).
#
# Environment: GOTESTFLAGS adds flags to `go test` (e.g. -run or -v);
# FUZZTIME sets how long each fuzz target runs, as go test -fuzztime takes it
# (default 20000x: a count of inputs, not a duration, because a duration can
# end with a spurious "context deadline exceeded" when a worker is slow to
# stop on a loaded machine; 0 to skip).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v go >/dev/null || { echo "test.sh: Go 1.26 or newer is required (go not found on PATH)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/doclog-test.XXXXXX")
chmod 755 "$work"
cleanup() {
	scripts/kafka.sh stop "$work/kafka" >/dev/null 2>&1 || true
	scripts/clickhouse.sh stop "$work/clickhouse" >/dev/null 2>&1 || true
	scripts/pg.sh stop "$work/pg" >/dev/null 2>&1 || true
	scripts/pg.sh stop "$work/pg-tls" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "== installing what is missing"
scripts/pg.sh install
scripts/kafka.sh install
scripts/clickhouse.sh install
st=$(scripts/schemathesis.sh install)
export TEST_SCHEMATHESIS=${st#TEST_SCHEMATHESIS=}

# value NAME OUTPUT prints the value of the line NAME=... in OUTPUT.
value() { sed -n "s/^$1=//p" <<<"$2"; }

echo "== starting Postgres, Kafka and ClickHouse"
scripts/certs.sh "$work/certs"
export TEST_TLS_CERTS=$work/certs
pg=$(scripts/pg.sh start "$work/pg")
export TEST_DATABASE_URL=${pg#DATABASE_URL=}
pg=$(PG_TLS_CERTS="$work/certs" scripts/pg.sh start "$work/pg-tls")
export TEST_DATABASE_TLS_URL=${pg#DATABASE_URL=}
kafka=$(KAFKA_SECURE_CERTS="$work/certs" scripts/kafka.sh start "$work/kafka")
TEST_KAFKA_SEEDS=$(value TEST_KAFKA_SEEDS "$kafka")
TEST_KAFKA_SECURE_SEEDS=$(value TEST_KAFKA_SECURE_SEEDS "$kafka")
TEST_KAFKA_SECURE_PASSWORD=$(value TEST_KAFKA_SECURE_PASSWORD "$kafka")
export TEST_KAFKA_SEEDS TEST_KAFKA_SECURE_SEEDS TEST_KAFKA_SECURE_PASSWORD
ch=$(CLICKHOUSE_TLS_CERTS="$work/certs" scripts/clickhouse.sh start "$work/clickhouse")
TEST_CLICKHOUSE_ADDR=$(value TEST_CLICKHOUSE_ADDR "$ch")
TEST_CLICKHOUSE_TLS_ADDR=$(value TEST_CLICKHOUSE_TLS_ADDR "$ch")
export TEST_CLICKHOUSE_ADDR TEST_CLICKHOUSE_TLS_ADDR
echo "TEST_DATABASE_URL=$TEST_DATABASE_URL"
echo "TEST_KAFKA_SEEDS=$TEST_KAFKA_SEEDS"
echo "TEST_CLICKHOUSE_ADDR=$TEST_CLICKHOUSE_ADDR"
echo "TEST_SCHEMATHESIS=$TEST_SCHEMATHESIS"
# The passwords stay out of the output.
echo "TEST_DATABASE_TLS_URL=postgres://postgres:xxxxx@127.0.0.1:$(cat "$work/pg-tls/port")/postgres?sslmode=verify-full"
echo "TEST_KAFKA_SECURE_SEEDS=$TEST_KAFKA_SECURE_SEEDS (SASL_SSL, SCRAM-SHA-512)"
echo "TEST_CLICKHOUSE_TLS_ADDR=$TEST_CLICKHOUSE_TLS_ADDR"

echo "== go vet"
go vet ./...

echo "== go test"
# shellcheck disable=SC2086
go test -count=1 -timeout 25m ${GOTESTFLAGS:-} ./...

echo "== examples/embed: another module composing the stages from public packages"
# shellcheck disable=SC2086
(cd examples/embed && go vet ./... && go test -count=1 -timeout 5m ${GOTESTFLAGS:-} ./...)

echo "== examples/projector: a projector of another module in a worker binary of its own, killed mid-batch"
# shellcheck disable=SC2086
(cd examples/projector && go vet ./... && go test -count=1 -timeout 5m ${GOTESTFLAGS:-} ./...)

fuzztime=${FUZZTIME:-20000x}
if [ "$fuzztime" != 0 ]; then
	echo "== fuzzing each target for $fuzztime"
	for pkg in $(go list ./...); do
		for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
			echo "-- $pkg $target"
			# A count, not a duration, so every machine fuzzes as much; the
			# slowest target (the incremental hash) takes 4-8 of go test's
			# default 10 minutes on two cores, so the bound is raised.
			go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" -timeout=20m "$pkg"
		done
	done
fi
echo "== all tests passed"
