#!/usr/bin/env bash
# A throwaway ClickHouse server for tests (Debian's clickhouse-server, 18.16 on
# Debian 12: the compatibility floor doclog's analytics must run on).
#
#   scripts/clickhouse.sh install     install Debian's clickhouse-server and
#                                     clickhouse-client when missing
#   scripts/clickhouse.sh start DIR   start a server with its data in DIR;
#                                     prints TEST_CLICKHOUSE_ADDR=host:port
#                                     (the native protocol) on stdout
#   scripts/clickhouse.sh stop DIR    stop it
#
# With CLICKHOUSE_TLS_CERTS=CERTDIR (a directory scripts/certs.sh wrote), the
# server also serves the native protocol over TLS on a port of its own
# (tcp_port_secure), with CERTDIR's server certificate, and refuses a client
# without a certificate signed by CERTDIR's CA; start then also prints
# TEST_CLICKHOUSE_TLS_ADDR=host:port. The plaintext port is the same as
# without it.
set -euo pipefail

die() { echo "clickhouse.sh: $*" >&2; exit 1; }

cmd_install() {
	if command -v clickhouse-server >/dev/null && command -v clickhouse-client >/dev/null; then
		return 0
	fi
	echo "installing clickhouse-server (Debian package)..." >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq clickhouse-server clickhouse-client >&2 ||
		{ apt-get update -qq >&2 && apt-get install -y -qq clickhouse-server clickhouse-client >&2; }
	command -v clickhouse-server >/dev/null || die "clickhouse-server not found after install"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

cmd_start() {
	local dir=$1 tcp http inter secure="" tls=""
	mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas"
	tcp=$(free_port)
	http=$(free_port)
	inter=$(free_port)
	if [ -n "${CLICKHOUSE_TLS_CERTS:-}" ]; then
		secure=$(free_port)
		tls=$(tls_config "$dir" "$CLICKHOUSE_TLS_CERTS" "$secure")
	fi
	cat >"$dir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>$dir/server.log</log>
        <errorlog>$dir/server.err.log</errorlog>
        <size>100M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>$tcp</tcp_port>
    <http_port>$http</http_port>
    <interserver_http_port>$inter</interserver_http_port>
    <max_connections>1024</max_connections>
    <max_concurrent_queries>200</max_concurrent_queries>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mark_cache_size>268435456</mark_cache_size>
    <path>$dir/data/</path>
    <tmp_path>$dir/tmp/</tmp_path>
    <user_files_path>$dir/user_files/</user_files_path>
    <format_schema_path>$dir/format_schemas/</format_schema_path>
    <users_config>$dir/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mlock_executable>false</mlock_executable>
$tls
</yandex>
XML
	cat >"$dir/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>4000000000</max_memory_usage>
            <load_balancing>random</load_balancing>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default></default></quotas>
</yandex>
XML
	clickhouse-server --config-file="$dir/config.xml" --pid-file="$dir/server.pid" --daemon >"$dir/stdout.log" 2>&1 ||
		{ cat "$dir/stdout.log" "$dir/server.err.log" 2>/dev/null >&2; die "clickhouse-server did not start"; }
	for _ in $(seq 1 150); do
		if clickhouse-client --host 127.0.0.1 --port "$tcp" --query 'SELECT 1' >/dev/null 2>&1; then
			echo "TEST_CLICKHOUSE_ADDR=127.0.0.1:$tcp"
			if [ -n "$secure" ]; then
				# The server opens its ports together, so a TLS port that
				# does not accept now never will.
				(exec 3<>"/dev/tcp/127.0.0.1/$secure") 2>/dev/null ||
					{ cat "$dir/server.err.log" >&2 2>/dev/null || true; die "clickhouse-server does not listen on its TLS port $secure"; }
				echo "TEST_CLICKHOUSE_TLS_ADDR=127.0.0.1:$secure"
			fi
			return 0
		fi
		sleep 0.2
	done
	cat "$dir/server.err.log" >&2 2>/dev/null || true
	die "clickhouse-server did not answer on port $tcp"
}

# tls_config copies the server's certificate from CERTDIR into DIR/tls and
# prints the configuration of the TLS port. In the server context of Poco,
# which 18.16 configures TLS through, "strict" is the mode that fails a
# handshake without a client certificate ("relaxed" checks one only when it
# is sent).
tls_config() {
	local dir=$1 certs=$2 port=$3 f
	for f in ca.pem server.pem server-key.pem; do
		[ -r "$certs/$f" ] || die "CLICKHOUSE_TLS_CERTS=$certs has no $f: run scripts/certs.sh $certs"
	done
	mkdir -p "$dir/tls"
	cp "$certs/ca.pem" "$certs/server.pem" "$certs/server-key.pem" "$dir/tls/"
	chmod 600 "$dir/tls/server-key.pem"
	cat <<XML
    <tcp_port_secure>$port</tcp_port_secure>
    <openSSL>
        <server>
            <certificateFile>$dir/tls/server.pem</certificateFile>
            <privateKeyFile>$dir/tls/server-key.pem</privateKeyFile>
            <caConfig>$dir/tls/ca.pem</caConfig>
            <loadDefaultCAFile>false</loadDefaultCAFile>
            <verificationMode>strict</verificationMode>
            <disableProtocols>sslv2,sslv3,tlsv1,tlsv1_1</disableProtocols>
            <cacheSessions>true</cacheSessions>
            <preferServerCiphers>true</preferServerCiphers>
        </server>
    </openSSL>
XML
}

cmd_stop() {
	local dir=$1 pid
	[ -f "$dir/server.pid" ] || return 0
	pid=$(cat "$dir/server.pid")
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_install; cmd_start "${2:?usage: clickhouse.sh start DIR}" ;;
stop) cmd_stop "${2:?usage: clickhouse.sh stop DIR}" ;;
*) echo "usage: scripts/clickhouse.sh install | start DIR | stop DIR" >&2; exit 2 ;;
esac
