#!/usr/bin/env bash
# A throwaway single-node Apache Kafka (KRaft, broker and controller in one
# JVM) for tests and benchmarks.
#
#   scripts/kafka.sh install     fetch the Kafka jars from Maven Central into
#                                .cache/kafka/libs (skipped when present) and
#                                build the readiness probe
#   scripts/kafka.sh start DIR   format a node in DIR, start it in the
#                                background and wait until it serves metadata;
#                                prints TEST_KAFKA_SEEDS=host:port on stdout
#   scripts/kafka.sh restart DIR stop the node started in DIR if it runs and
#                                start it again on its storage and ports
#   scripts/kafka.sh stop DIR    stop the node started in DIR
#   scripts/kafka.sh start-cluster DIR
#                                three nodes, each KRaft controller and broker
#                                (DIR/node1..3, a static quorum of the three),
#                                internal topics replicated 3 times with
#                                min.insync.replicas 2; waits until all three
#                                serve as brokers; prints
#                                TEST_KAFKA_SEEDS=host:port,host:port,host:port
#   scripts/kafka.sh stop-cluster DIR
#                                stop the cluster started in DIR
#
# With KAFKA_LINK_LATENCY=DURATION (whole milliseconds, e.g. 1ms),
# start-cluster puts a TCP proxy that adds that delay each way
# (internal/latencyproxy) in front of every listener of every node, and each
# node advertises the proxy's addresses: clients, the brokers' replication
# and the controllers' quorum all cross a link of that latency. Each node's
# heap is at most KAFKA_HEAP (default 512m for a cluster node, 768m for
# start). Three JVMs starting on two busy cores can take minutes: the wait
# for readiness is KAFKA_READY_TIMEOUT (default 300s for a cluster, 60s for
# start and restart).
#
# With KAFKA_PROXIED_ADVERTISE=host:port in the environment, start adds a
# second listener that advertises that address instead of its own, and writes
# the listener's real host:port to DIR/proxied: clients that bootstrap through
# a TCP proxy at host:port forwarding to DIR/proxied keep talking through it
# (the chaos run cuts one member's broker traffic that way).
#
# With KAFKA_SECURE_CERTS=CERTDIR (a directory scripts/certs.sh wrote), start
# adds a listener named SECURE that speaks SASL_SSL: TLS with CERTDIR's server
# certificate, a client certificate signed by its CA required, and SASL
# SCRAM-SHA-512 as user "doclog" with the password in KAFKA_SCRAM_PASSWORD
# (default: a random one). start and restart then also print
# TEST_KAFKA_SECURE_SEEDS=host:port and TEST_KAFKA_SECURE_PASSWORD=...; the
# PLAINTEXT listener is the same as without it. The server's certificate
# files are copied into DIR, so CERTDIR may go away.
#
# Needs Java 17+, Maven and Go, nothing else. Everything but the final
# TEST_KAFKA_* lines goes to stderr, so callers can capture stdout. The
# broker's own output is in DIR/kafka.log.
set -euo pipefail

KAFKA_VERSION=4.4.0
# log4j2 binding for the slf4j 1.7 API Kafka logs through; without it the broker
# runs blind, and LoggingController wants log4j-core on the class path.
LOG4J_VERSION=2.24.3

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=$ROOT/.cache/kafka
LIBS=$CACHE/libs
PROBE=$CACHE/bin/kafkaready

die() { echo "kafka.sh: $*" >&2; exit 1; }

check_java() {
	command -v java >/dev/null || die "java not found: install a Java 17+ runtime"
	local v
	v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
	[ -n "$v" ] && [ "$v" -ge 17 ] || die "Kafka $KAFKA_VERSION needs Java 17 or newer (found: ${v:-unknown})"
}

cmd_install() {
	check_java
	if [ ! -f "$LIBS/.complete-$KAFKA_VERSION" ]; then
		command -v mvn >/dev/null || die "mvn not found: install Maven"
		echo "fetching Apache Kafka $KAFKA_VERSION jars with Maven..." >&2
		local work
		work=$(mktemp -d)
		# shellcheck disable=SC2064
		trap "rm -rf '$work'" RETURN
		cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>doclog.dev</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- ConsoleProducer and friends, for tests that write raw records. -->
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.8.1</version>
      </plugin>
    </plugins>
  </build>
</project>
EOF
		rm -rf "$LIBS"
		mkdir -p "$LIBS"
		mvn -B -q -f "$work/pom.xml" dependency:copy-dependencies \
			-DincludeScope=runtime -DoutputDirectory="$LIBS" >"$work/mvn.log" 2>&1 ||
			{ cat "$work/mvn.log" >&2; die "maven could not fetch the Kafka jars"; }
		ls "$LIBS"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 || die "kafka_2.13-$KAFKA_VERSION.jar missing after the fetch"
		touch "$LIBS/.complete-$KAFKA_VERSION"
	fi
	build_probe
}

build_probe() {
	command -v go >/dev/null || die "go not found"
	mkdir -p "$(dirname "$PROBE")"
	(cd "$ROOT" && go build -o "$PROBE" ./internal/kafkaready) || die "building the readiness probe failed"
}

# free_port prints a localhost port nothing listens on, below Linux's
# ephemeral range so no outgoing connection holds it. Kafka binds it a moment
# later; a collision in between is unlikely and fails loudly.
free_port() {
	local p i
	for i in $(seq 1 50); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

# cluster_id prints a random cluster id as `StorageTool random-uuid` would (a
# UUID in unpadded base64url) without starting a JVM for it.
cluster_id() {
	local id
	# An id that starts with "-" would read as an option to StorageTool (Kafka's
	# own random-uuid skips those too); the bytes come straight from urandom,
	# since a NUL or a "%" among them would upset printf.
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
		[ "${id:0:1}" != - ] && [ ${#id} -eq 22 ] && break
	done
	echo "$id"
}

cmd_start() {
	DIR=$1
	check_java
	[ -f "$LIBS/.complete-$KAFKA_VERSION" ] || die "Kafka jars missing: run scripts/kafka.sh install"
	[ -x "$PROBE" ] || build_probe
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	if [ -f "$DIR/kafka.pid" ] && kill -0 "$(cat "$DIR/kafka.pid")" 2>/dev/null; then
		die "a broker already runs from $DIR (pid $(cat "$DIR/kafka.pid")); stop it first"
	fi
	local bport cport
	bport=$(free_port)
	cport=$(free_port)
	while [ "$cport" = "$bport" ]; do cport=$(free_port); done
	local listeners="PLAINTEXT://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport"
	local advertised="PLAINTEXT://127.0.0.1:$bport" protocols="CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
	rm -f "$DIR/proxied"
	if [ -n "${KAFKA_PROXIED_ADVERTISE:-}" ]; then
		local xport
		xport=$(free_port)
		while [ "$xport" = "$bport" ] || [ "$xport" = "$cport" ]; do xport=$(free_port); done
		listeners+=",PROXIED://127.0.0.1:$xport"
		advertised+=",PROXIED://$KAFKA_PROXIED_ADVERTISE"
		protocols+=",PROXIED:PLAINTEXT"
		echo "127.0.0.1:$xport" >"$DIR/proxied"
	fi
	rm -f "$DIR/secure" "$DIR/scram-password"
	local secure="" scram=()
	if [ -n "${KAFKA_SECURE_CERTS:-}" ]; then
		local sport password
		sport=$(free_port)
		while [ "$sport" = "$bport" ] || [ "$sport" = "$cport" ] || [ "$sport" = "${xport:-}" ]; do sport=$(free_port); done
		password=${KAFKA_SCRAM_PASSWORD:-$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')}
		secure=$(secure_listener "$DIR" "$KAFKA_SECURE_CERTS" "$password")
		scram=(--add-scram "SCRAM-SHA-512=[name=doclog,password=$password]")
		listeners+=",SECURE://127.0.0.1:$sport"
		advertised+=",SECURE://127.0.0.1:$sport"
		protocols+=",SECURE:SASL_SSL"
		echo "127.0.0.1:$sport" >"$DIR/secure"
		(umask 077 && echo "$password" >"$DIR/scram-password")
	fi
	rm -rf "$DIR/data"
	cat >"$DIR/server.properties" <<EOF
# One node that is both KRaft controller and broker, for tests only.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=$listeners
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protocols
log.dirs=$DIR/data

# One broker: internal topics cannot be replicated.
$(node_properties 1 1 4)
$secure
EOF
	log4j_properties "$DIR"
	format "$DIR" "$(cluster_id)" --standalone ${scram[@]+"${scram[@]}"}
	launch "$DIR"
}

# launch starts the broker formatted in DIR and waits until it serves
# metadata.
launch() {
	local DIR=$1 seeds
	# The PLAINTEXT listener alone: a proxied one may follow it on the line.
	seeds=$(sed -n 's|^advertised.listeners=PLAINTEXT://\([^,]*\).*|\1|p' "$DIR/server.properties")
	spawn "$DIR" "${KAFKA_HEAP:-768m}"
	if ! "$PROBE" -seeds "$seeds" -timeout "${KAFKA_READY_TIMEOUT:-60s}" -pid "$(cat "$DIR/kafka.pid")" >&2; then
		tail -n 40 "$DIR/kafka.log" "$DIR/server.log" >&2 || true
		cmd_stop "$DIR"
		die "the broker did not become ready"
	fi
	echo "$seeds" >"$DIR/seeds"
	echo "TEST_KAFKA_SEEDS=$seeds"
	if [ -f "$DIR/secure" ]; then
		echo "TEST_KAFKA_SECURE_SEEDS=$(cat "$DIR/secure")"
		echo "TEST_KAFKA_SECURE_PASSWORD=$(cat "$DIR/scram-password")"
	fi
}

# node_properties RF ISR THREADS prints the settings every node shares: its
# internal topics' replication factor and min.insync.replicas, and THREADS
# I/O and background threads.
node_properties() {
	cat <<EOF
offsets.topic.replication.factor=$1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$1
transaction.state.log.min.isr=$2
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=$1
share.coordinator.state.topic.min.isr=$2

# Fast group joins and rebalances: tests use session timeouts of a second or two.
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=500
group.consumer.min.session.timeout.ms=1000
group.consumer.min.heartbeat.interval.ms=500

# Topics exist only when doclog (or a test) creates them with their specs.
auto.create.topics.enable=false
num.partitions=1

# Two cores: keep the thread count modest.
num.network.threads=2
num.io.threads=$3
background.threads=$3
log.cleaner.threads=1
EOF
}

# spawn DIR HEAP starts the JVM of the node formatted in DIR in the
# background, its pid in DIR/kafka.pid.
spawn() {
	local DIR=$1 heap=$2
	# stdin and stdout detached: a caller capturing our stdout must not wait
	# for the broker to exit.
	nohup java -Xms256m -Xmx"$heap" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$DIR/log4j2.properties" \
		-cp "$LIBS/*" kafka.Kafka "$DIR/server.properties" \
		</dev/null >>"$DIR/kafka.log" 2>&1 &
	echo $! >"$DIR/kafka.pid"
}

# log4j_properties DIR writes the broker's logging configuration.
log4j_properties() {
	cat >"$1/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $1/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
EOF
}

# format DIR CLUSTER [ARGS...] formats the storage of the node in DIR.
format() {
	local DIR=$1 cluster=$2
	shift 2
	# A short-lived JVM: C1 alone starts faster.
	java -XX:TieredStopAtLevel=1 -Xmx256m -Dlog4j2.configurationFile="$DIR/log4j2.properties" -cp "$LIBS/*" \
		kafka.tools.StorageTool format -t "$cluster" -c "$DIR/server.properties" "$@" >>"$DIR/kafka.log" 2>&1 ||
		{ tail -n 30 "$DIR/kafka.log" >&2; die "formatting the storage in $DIR failed"; }
}

# cmd_start_cluster DIR: three nodes of one KRaft quorum (the header).
cmd_start_cluster() {
	local DIR=$1 i latency=${KAFKA_LINK_LATENCY:-}
	check_java
	[ -f "$LIBS/.complete-$KAFKA_VERSION" ] || die "Kafka jars missing: run scripts/kafka.sh install"
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	# The probe and the proxy of this checkout, built afresh: a probe
	# cached by an older checkout may not know -brokers.
	local probe=$DIR/bin/kafkaready proxy=$DIR/bin/latencyproxy
	(cd "$ROOT" && go build -o "$probe" ./internal/kafkaready && go build -o "$proxy" ./internal/latencyproxy) ||
		die "building the readiness probe and the latency proxy failed"
	for i in 1 2 3; do
		if [ -f "$DIR/node$i/kafka.pid" ] && kill -0 "$(cat "$DIR/node$i/kafka.pid")" 2>/dev/null; then
			die "a cluster already runs from $DIR; stop it first (scripts/kafka.sh stop-cluster $DIR)"
		fi
	done
	# Per node: the broker's and the controller's ports, and the ports it
	# advertises for them (the proxy's, or the same).
	local used=" " bport=() cport=() badv=() cadv=() p
	pick() {
		p=$(free_port)
		while [[ $used == *" $p "* ]]; do p=$(free_port); done
		used+="$p "
	}
	for i in 0 1 2; do
		pick
		bport[i]=$p
		pick
		cport[i]=$p
		if [ -n "$latency" ]; then
			pick
			badv[i]=$p
			pick
			cadv[i]=$p
		else
			badv[i]=${bport[i]}
			cadv[i]=${cport[i]}
		fi
	done
	rm -f "$DIR/latencyproxy.pid" "$DIR/seeds"
	if [ -n "$latency" ]; then
		local links=()
		for i in 0 1 2; do
			links+=(-link "127.0.0.1:${badv[i]}=127.0.0.1:${bport[i]}" -link "127.0.0.1:${cadv[i]}=127.0.0.1:${cport[i]}")
		done
		rm -f "$DIR/latencyproxy.ready"
		nohup "$proxy" -latency "$latency" -ready "$DIR/latencyproxy.ready" "${links[@]}" \
			</dev/null >>"$DIR/latencyproxy.log" 2>&1 &
		echo $! >"$DIR/latencyproxy.pid"
		for i in $(seq 1 100); do
			[ -f "$DIR/latencyproxy.ready" ] && break
			kill -0 "$(cat "$DIR/latencyproxy.pid")" 2>/dev/null || break
			sleep 0.1
		done
		if [ ! -f "$DIR/latencyproxy.ready" ]; then
			cat "$DIR/latencyproxy.log" >&2
			cmd_stop_cluster "$DIR"
			die "the latency proxy did not start"
		fi
	fi
	local voters="" seeds="" cluster node
	for i in 0 1 2; do
		voters+="${voters:+,}$((i + 1))@127.0.0.1:${cadv[i]}"
		seeds+="${seeds:+,}127.0.0.1:${badv[i]}"
	done
	cluster=$(cluster_id)
	for i in 0 1 2; do
		node=$DIR/node$((i + 1))
		mkdir -p "$node"
		rm -rf "$node/data"
		cat >"$node/server.properties" <<EOF
# Node $((i + 1)) of a three-node KRaft cluster (controller and broker), for
# benchmarks and tests only.
process.roles=broker,controller
node.id=$((i + 1))
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:${bport[i]},CONTROLLER://127.0.0.1:${cport[i]}
advertised.listeners=PLAINTEXT://127.0.0.1:${badv[i]},CONTROLLER://127.0.0.1:${cadv[i]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$node/data

# Three replicas, two in sync for acks=all, as in production.
default.replication.factor=3
min.insync.replicas=2
# Three JVMs on two cores: fewer threads than a single node's.
$(node_properties 3 2 2)
EOF
		log4j_properties "$node"
		format "$node" "$cluster"
	done
	local pids=""
	for i in 1 2 3; do
		spawn "$DIR/node$i" "${KAFKA_HEAP:-512m}"
		pids+="${pids:+,}$(cat "$DIR/node$i/kafka.pid")"
	done
	if ! "$probe" -seeds "$seeds" -brokers 3 -timeout "${KAFKA_READY_TIMEOUT:-300s}" -pid "$pids" >&2; then
		for i in 1 2 3; do tail -n 5 "$DIR/node$i/server.log" | cut -c1-300 >&2 || true; done
		cmd_stop_cluster "$DIR"
		die "the cluster did not become ready"
	fi
	echo "$seeds" >"$DIR/seeds"
	echo "TEST_KAFKA_SEEDS=$seeds"
}

# cmd_stop_cluster DIR stops the nodes and the proxy started in DIR.
cmd_stop_cluster() {
	local DIR=$1 i stopping=()
	for i in 1 2 3; do
		if [ -d "$DIR/node$i" ]; then
			cmd_stop "$DIR/node$i" &
			stopping+=($!)
		fi
	done
	# These alone: the proxy may be a child of this shell too.
	wait ${stopping[@]+"${stopping[@]}"}
	if [ -f "$DIR/latencyproxy.pid" ]; then
		kill -TERM "$(cat "$DIR/latencyproxy.pid")" 2>/dev/null || true
		rm -f "$DIR/latencyproxy.pid"
	fi
}

# secure_listener copies the server's certificate from CERTDIR into DIR/tls
# and prints the SECURE listener's settings. SCRAM credentials live in the
# cluster metadata, so they are added when the storage is formatted, not here.
secure_listener() {
	local dir=$1 certs=$2 password=$3 f
	for f in ca.pem server.pem server-key.pem; do
		[ -r "$certs/$f" ] || die "KAFKA_SECURE_CERTS=$certs has no $f: run scripts/certs.sh $certs"
	done
	# The password sits between the brackets and commas of a format argument.
	case "$password" in "" | *[],=[]*) die "KAFKA_SCRAM_PASSWORD must be non-empty and hold none of , = [ ]" ;; esac
	mkdir -p "$dir/tls"
	(umask 077 && cat "$certs/server-key.pem" "$certs/server.pem" >"$dir/tls/keystore.pem")
	cp "$certs/ca.pem" "$dir/tls/ca.pem"
	# PEM stores spare a keytool step; the key is unencrypted PKCS#8, so it
	# has no password.
	cat <<EOF
# SASL_SSL with a client certificate, for tests of TLS and SCRAM.
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.secure.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.secure.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.secure.ssl.keystore.type=PEM
listener.name.secure.ssl.keystore.location=$dir/tls/keystore.pem
listener.name.secure.ssl.truststore.type=PEM
listener.name.secure.ssl.truststore.location=$dir/tls/ca.pem
listener.name.secure.ssl.client.auth=required
EOF
}

cmd_stop() {
	local dir=$1 pid i
	[ -f "$dir/kafka.pid" ] || return 0
	pid=$(cat "$dir/kafka.pid")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "kafka.sh: broker $pid did not stop in 10s; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$dir/kafka.pid"
}

case "${1:-}" in
install) cmd_install ;;
start)
	[ $# -eq 2 ] || die "usage: scripts/kafka.sh start DIR"
	cmd_start "$2"
	;;
restart)
	# The node started in DIR, stopped if it runs, started again on its
	# storage and its ports (tests of a broker restart).
	[ $# -eq 2 ] || die "usage: scripts/kafka.sh restart DIR"
	[ -f "$2/server.properties" ] || die "no node in $2: start one first"
	check_java
	[ -x "$PROBE" ] || build_probe
	cmd_stop "$2"
	launch "$(cd "$2" && pwd)"
	;;
stop)
	[ $# -eq 2 ] || die "usage: scripts/kafka.sh stop DIR"
	cmd_stop "$2"
	;;
start-cluster)
	[ $# -eq 2 ] || die "usage: scripts/kafka.sh start-cluster DIR"
	cmd_start_cluster "$2"
	;;
stop-cluster)
	[ $# -eq 2 ] || die "usage: scripts/kafka.sh stop-cluster DIR"
	cmd_stop_cluster "$2"
	;;
*)
	echo "usage: scripts/kafka.sh install | start DIR | restart DIR | stop DIR | start-cluster DIR | stop-cluster DIR" >&2
	exit 2
	;;
esac
