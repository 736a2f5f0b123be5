#!/usr/bin/env bash
# Throwaway Postgres clusters for tests, benchmarks and `make run`.
#
#   scripts/pg.sh install          install Debian's postgresql if it is missing
#   scripts/pg.sh start DIR [fsync] initialise a cluster in DIR and start it;
#                                   prints DATABASE_URL=... on stdout
#   scripts/pg.sh stop DIR          stop the cluster in DIR
#   scripts/pg.sh restart DIR [MODE] restart the cluster in DIR on its port and
#                                   settings; MODE is pg_ctl's shutdown mode
#                                   (default fast; immediate is a crash and
#                                   recovery, as the chaos run wants)
#
# initdb refuses to run as root, so as root the cluster belongs to the
# "postgres" user that Debian's package creates. fsync is off unless the
# second argument is "fsync" (benchmarks measure with it on).
#
# With PG_TLS_CERTS=CERTDIR (a directory scripts/certs.sh wrote), start makes
# a cluster that takes TCP connections only over TLS, with CERTDIR's server
# certificate, and only with a password (scram-sha-256; the superuser's is
# random, kept in DIR/password); the printed DATABASE_URL carries the
# password, sslmode=verify-full and sslrootcert=CERTDIR/ca.pem. The Unix
# socket in DIR, which only DIR's owner can reach, stays trusted, for pg_ctl.
# A cluster keeps the mode it was made with.
set -euo pipefail

pg_bindir() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && { echo "$d"; return 0; }
	done
	return 1
}

cmd_install() {
	if pg_bindir >/dev/null; then return 0; fi
	echo "installing postgresql (Debian package)..." >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq postgresql >&2
	pg_bindir >/dev/null || { echo "postgresql installed but initdb not found" >&2; exit 1; }
}

as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 - <<'PY' 2>/dev/null || echo 55432
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

cmd_start() {
	local dir=$1 durability=${2:-nofsync} bin port
	bin=$(pg_bindir)
	mkdir -p "$dir"
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
		chown postgres "$dir"
		chmod 700 "$dir"
	fi
	local tls=${PG_TLS_CERTS:-}
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		local auth=(--auth=trust)
		if [ -n "$tls" ]; then
			# A password without URL metacharacters goes into the URL as is.
			(umask 077 && head -c 18 /dev/urandom | base64 | tr '+/' '-_' >"$dir/password")
			if [ "$(id -u)" = 0 ]; then chown postgres "$dir/password"; fi
			auth=(--auth-local=trust --auth-host=scram-sha-256 --pwfile="$dir/password")
		fi
		as_owner "$bin/initdb" -D "$dir/data" -U postgres "${auth[@]}" -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
			{ cat "$dir/initdb.log" >&2; exit 1; }
	fi
	if [ -n "$tls" ] && [ ! -f "$dir/password" ]; then
		echo "pg.sh: the cluster in $dir was made without PG_TLS_CERTS; start it without, or in a new DIR" >&2
		exit 1
	fi
	port=$(free_port)
	local opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir"
	if [ -n "$tls" ]; then
		local tlsopts
		tlsopts=$(tls_setup "$dir" "$tls")
		opts+=$tlsopts
	fi
	opts+=" -c max_connections=400 -c max_locks_per_transaction=1024 -c shared_buffers=256MB"
	opts+=" -c max_wal_size=2GB -c checkpoint_timeout=15min"
	if [ "$durability" = fsync ]; then
		opts+=" -c fsync=on -c synchronous_commit=on"
	else
		opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	fi
	as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "$opts" -w -t 60 start >/dev/null ||
		{ cat "$dir/server.log" >&2; exit 1; }
	echo "$port" >"$dir/port"
	if [ -n "$tls" ]; then
		local ca
		ca=$(cd "$tls" && pwd)/ca.pem
		echo "DATABASE_URL=postgres://postgres:$(cat "$dir/password")@127.0.0.1:$port/postgres?sslmode=verify-full&sslrootcert=$(urlquote "$ca")"
		return 0
	fi
	echo "DATABASE_URL=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

# tls_setup copies the server's certificate from CERTDIR into DIR/tls, owned
# by the cluster's user as Postgres insists for the key, makes TCP take TLS
# with a password only, and prints the server options that turn TLS on.
tls_setup() {
	local dir=$1 certs=$2 f
	for f in ca.pem server.pem server-key.pem; do
		[ -r "$certs/$f" ] || { echo "pg.sh: PG_TLS_CERTS=$certs has no $f: run scripts/certs.sh $certs" >&2; exit 1; }
	done
	mkdir -p "$dir/tls"
	cp "$certs/server.pem" "$certs/server-key.pem" "$dir/tls/"
	chmod 600 "$dir/tls/server-key.pem"
	if [ "$(id -u)" = 0 ]; then chown -R postgres "$dir/tls"; fi
	# No host line: a TCP connection without TLS finds no entry and is
	# refused, so verify-full on the client is what stands between it and
	# a server that is not this one.
	as_owner tee "$dir/data/pg_hba.conf" >/dev/null <<EOF
local all all trust
hostssl all all 127.0.0.1/32 scram-sha-256
hostssl all all ::1/128 scram-sha-256
EOF
	echo " -c ssl=on -c ssl_cert_file=$dir/tls/server.pem -c ssl_key_file=$dir/tls/server-key.pem -c ssl_min_protocol_version=TLSv1.2"
}

urlquote() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="/"))' "$1"; }

cmd_stop() {
	local dir=$1 bin
	bin=$(pg_bindir)
	[ -f "$dir/data/postmaster.pid" ] || return 0
	as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}

cmd_restart() {
	local dir=$1 mode=$2 bin
	bin=$(pg_bindir)
	[ -f "$dir/data/PG_VERSION" ] || { echo "pg.sh: no cluster in $dir: start one first" >&2; exit 1; }
	case "$mode" in smart | fast | immediate) ;; *) echo "pg.sh: unknown shutdown mode $mode" >&2; exit 2 ;; esac
	# pg_ctl restart reuses the options the server was started with
	# (postmaster.opts), so the port and the durability settings stay.
	as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m "$mode" -w -t 60 restart >/dev/null ||
		{ tail -n 30 "$dir/server.log" >&2; exit 1; }
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_install; cmd_start "${2:?usage: pg.sh start DIR [fsync]}" "${3:-nofsync}" ;;
stop) cmd_stop "${2:?usage: pg.sh stop DIR}" ;;
restart) cmd_restart "${2:?usage: pg.sh restart DIR [smart|fast|immediate]}" "${3:-fast}" ;;
*) echo "usage: scripts/pg.sh install | start DIR [fsync] | stop DIR | restart DIR [MODE]" >&2; exit 2 ;;
esac
