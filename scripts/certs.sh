#!/usr/bin/env bash
# Throwaway certificates for tests of TLS to Kafka, Postgres and ClickHouse.
#
#   scripts/certs.sh DIR   write a fresh CA and a server and a client
#                          certificate signed by it into DIR
#
# DIR then holds, all PEM:
#   ca.pem, ca-key.pem          the authority (CN "doclog test CA")
#   server.pem, server-key.pem  the servers' certificate, valid for
#                               localhost and 127.0.0.1
#   client.pem, client-key.pem  a client certificate (CN "doclog")
#
# Keys are P-256 in PKCS#8, which is what Kafka's PEM key stores, Postgres and
# ClickHouse all read, and are readable by their owner only. Certificates
# last two days: long enough for any test run, short enough that a copy left
# behind is soon worthless. Needs openssl.
set -euo pipefail

die() { echo "certs.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: scripts/certs.sh DIR"
command -v openssl >/dev/null || die "openssl not found: install Debian's openssl"
dir=$1
mkdir -p "$dir"
work=$(mktemp -d)
# shellcheck disable=SC2064
trap "rm -rf '$work'" EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; chmod 600 "$1"; }

# sign NAME CN EXTENSIONS: NAME.pem for NAME-key.pem, signed by the CA.
sign() {
	local name=$1 cn=$2 ext=$3
	key "$work/$name-key.pem"
	openssl req -new -key "$work/$name-key.pem" -subj "/CN=$cn" -out "$work/$name.csr" 2>/dev/null
	printf '%s\n' "$ext" >"$work/$name.ext"
	openssl x509 -req -in "$work/$name.csr" -CA "$work/ca.pem" -CAkey "$work/ca-key.pem" \
		-set_serial "0x$(openssl rand -hex 16)" -days 2 -extfile "$work/$name.ext" -out "$work/$name.pem" 2>/dev/null ||
		die "signing the $name certificate failed"
}

key "$work/ca-key.pem"
openssl req -x509 -new -key "$work/ca-key.pem" -subj "/CN=doclog test CA" -days 2 \
	-addext "basicConstraints=critical,CA:true" -addext "keyUsage=critical,keyCertSign,cRLSign" \
	-out "$work/ca.pem" 2>/dev/null || die "creating the CA failed"
sign server localhost "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
sign client doclog "basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"

for f in ca.pem ca-key.pem server.pem server-key.pem client.pem client-key.pem; do
	mv -f "$work/$f" "$dir/$f"
done
chmod 644 "$dir/ca.pem" "$dir/server.pem" "$dir/client.pem"
