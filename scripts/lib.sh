# shellcheck shell=bash
# Sourced by the benchmark and soak drivers (bench-pipeline.sh, bench-rebuild.sh,
# bench-reference.sh, bench-cluster.sh, soak.sh) from the repository root,
# under their `set -euo pipefail`. It owns what they set up alike: the run's
# scratch directory with a throwaway Postgres (fsync on) and a single-node
# Kafka in it, and their stop; the roles as separate processes; and the
# machine report, which is scripts/machine.sh's lines, each driver adding
# its own after them in its machine.txt.
#
# Each function returns at its first failed step by itself: bash turns
# errexit off inside a function called in a condition, as in
# `start_postgres || fail "..."`.

pg_started=
kafka_started=
role_pids=()

# new_work NAME: a scratch directory, $work. Readable by all: as root the
# Postgres cluster in it runs as the "postgres" user.
new_work() {
	work=$(mktemp -d -t "doclog-$1.XXXXXX") || return
	chmod 755 "$work"
}

# start_postgres: a throwaway Postgres with fsync on in $work/pg, its URL in
# $db.
start_postgres() {
	scripts/pg.sh install || return
	pg_started=1
	db=$(scripts/pg.sh start "$work/pg" fsync) || return
	db=${db#DATABASE_URL=}
}

# preload_pg_stat_statements: restarts the cluster of start_postgres with
# pg_stat_statements, which counts statements only when preloaded.
preload_pg_stat_statements() {
	psql "$db" -qc "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" || return
	scripts/pg.sh stop "$work/pg" || return
	db=$(scripts/pg.sh start "$work/pg" fsync) || return
	db=${db#DATABASE_URL=}
	psql "$db" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
}

# start_kafka: a throwaway single-node Kafka in $work/kafka, its seeds in
# $seeds.
start_kafka() {
	scripts/kafka.sh install || return
	kafka_started=1
	seeds=$(scripts/kafka.sh start "$work/kafka") || return
	seeds=${seeds#TEST_KAFKA_SEEDS=}
}

# use_services DATABASE_URL SEEDS: the caller's services in $db and $seeds
# when it gave both, otherwise a throwaway Postgres and Kafka.
use_services() {
	if [ -n "$1" ] && [ -n "$2" ]; then
		db=$1 seeds=$2
		return 0
	fi
	start_postgres || return
	start_kafka
}

# stop_services: stops what start_postgres and start_kafka started, never
# services the caller gave, and removes $work. It ends in success: as the
# last command of an EXIT trap its status would be the script's.
stop_services() {
	if [ -n "$kafka_started" ]; then scripts/kafka.sh stop "$work/kafka" >/dev/null 2>&1 || true; fi
	if [ -n "$pg_started" ]; then scripts/pg.sh stop "$work/pg" >/dev/null 2>&1 || true; fi
	rm -rf "$work"
}

# start_roles DOCLOG PREFIX API_PORT OPS_PORT LOGS [NAME=VALUE...]: migrates
# $db, then `DOCLOG serve --roles=ROLE` for ingest, executor and projectors,
# three processes on $db and $seeds with topics PREFIX (4 jobs partitions,
# replication 1) and the environment NAME=VALUE added. Role n of the three
# serves its API on 127.0.0.1:API_PORT+n and its ops on OPS_PORT+n and logs
# to LOGS<role>.log; the pids go to role_pids. Returns once each is ready,
# or non-zero, the three killed, when one is not within 60 s.
start_roles() {
	local doclog=$1 prefix=$2 api=$3 ops=$4 logs=$5 role port n=0
	shift 5
	role_pids=()
	"$doclog" migrate --database-url "$db" >/dev/null || return
	for role in ingest executor projectors; do
		n=$((n + 1))
		env "$@" DOCLOG_DATABASE_URL="$db" DOCLOG_KAFKA_SEEDS="$seeds" DOCLOG_TOPICS_PREFIX="$prefix" \
			DOCLOG_TOPICS_JOBS_PARTITIONS=4 DOCLOG_TOPICS_REPLICATION_FACTOR=1 DOCLOG_TOPICS_MIN_INSYNC_REPLICAS=1 \
			DOCLOG_HTTP_ADDR=127.0.0.1:$((api + n)) DOCLOG_OPS_ADDR=127.0.0.1:$((ops + n)) \
			"$doclog" serve --roles="$role" >"$logs$role.log" 2>&1 &
		role_pids+=($!)
	done
	for port in $((ops + 1)) $((ops + 2)) $((ops + 3)); do
		for _ in $(seq 1 120); do
			curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
			sleep 0.5
		done
		if ! curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null; then
			echo "a role on :$port is not ready; see ${logs%/*}" >&2
			kill "${role_pids[@]}" 2>/dev/null || true
			role_pids=()
			return 1
		fi
	done
}

# stop_roles: TERM to the roles of start_roles, and waits for them to exit.
# Non-zero when one was gone already: it had died during the run.
stop_roles() {
	local status=0
	[ ${#role_pids[@]} -eq 0 ] && return 0
	kill -TERM "${role_pids[@]}" || status=$?
	wait "${role_pids[@]}" 2>/dev/null || true
	role_pids=()
	return "$status"
}
