package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/doclog/doclog/kafka"
)

// The variables naming the secured servers `make test` starts beside the
// plain ones, all with certificates from scripts/certs.sh.
const (
	// EnvTLSCerts names the directory scripts/certs.sh wrote: the CA the
	// secured servers' certificates chain to, and a client certificate
	// they accept.
	EnvTLSCerts = "TEST_TLS_CERTS"
	// EnvKafkaSecureSeeds names the test broker's SASL_SSL listener
	// (host:port): TLS with a client certificate, then SCRAM-SHA-512 as
	// KafkaSecureUser.
	EnvKafkaSecureSeeds = "TEST_KAFKA_SECURE_SEEDS"
	// EnvKafkaSecurePassword names the variable holding KafkaSecureUser's
	// password.
	EnvKafkaSecurePassword = "TEST_KAFKA_SECURE_PASSWORD"
	// EnvDatabaseTLSURL names the URL of a Postgres server that takes TCP
	// connections over TLS with a password only; the URL has
	// sslmode=verify-full and sslrootcert.
	EnvDatabaseTLSURL = "TEST_DATABASE_TLS_URL"
	// EnvClickHouseTLSAddr names the test ClickHouse server's native TLS
	// port (host:port), which refuses clients without a certificate.
	EnvClickHouseTLSAddr = "TEST_CLICKHOUSE_TLS_ADDR"
)

// KafkaSecureUser is the SCRAM user scripts/kafka.sh creates.
const KafkaSecureUser = "doclog"

// TLSFiles are the PEM files of scripts/certs.sh a client uses.
type TLSFiles struct {
	// CA is the authority of every secured test server's certificate.
	CA string
	// ClientCert and ClientKey are a client certificate the servers
	// accept.
	ClientCert, ClientKey string
}

// TLSCerts returns the files in EnvTLSCerts, failing the test when the
// variable is not set or a file is missing.
func TLSCerts(t testing.TB) TLSFiles {
	t.Helper()
	dir := os.Getenv(EnvTLSCerts)
	if dir == "" {
		t.Fatalf("%s is not set: run `make test`, or write certificates with `scripts/certs.sh DIR` and export %s=DIR", EnvTLSCerts, EnvTLSCerts)
	}
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem"), ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem")}
	for _, p := range []string{f.CA, f.ClientCert, f.ClientKey} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v (write it with `scripts/certs.sh DIR`)", EnvTLSCerts, dir, err)
		}
	}
	return f
}

// KafkaSecure is Kafka on the test broker's SASL_SSL listener: its Config
// trusts the test CA, presents the client certificate and authenticates
// with SCRAM-SHA-512, and its cleanup goes through the same listener.
func KafkaSecure(t testing.TB) *KafkaEnv {
	t.Helper()
	seeds := secureEnv(t, EnvKafkaSecureSeeds, "KAFKA_SECURE_CERTS=CERTDIR scripts/kafka.sh start DIR")
	password := secureEnv(t, EnvKafkaSecurePassword, "KAFKA_SECURE_CERTS=CERTDIR scripts/kafka.sh start DIR")
	certs := TLSCerts(t)
	return kafkaWith(t, kafka.Config{
		Seeds:    strings.Split(seeds, ","),
		ClientID: "doclog-test",
		TLS:      kafka.TLSConfig{Enabled: true, CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey},
		SASL:     kafka.SASLConfig{Mechanism: kafka.SASLScramSHA512, Username: KafkaSecureUser, Password: password},
	})
}

// PostgresTLSURL returns the URL in EnvDatabaseTLSURL, failing the test
// when it is not set.
func PostgresTLSURL(t testing.TB) string {
	t.Helper()
	return secureEnv(t, EnvDatabaseTLSURL, "PG_TLS_CERTS=CERTDIR scripts/pg.sh start DIR")
}

// PostgresTLSSchema is PostgresSchema on the server of EnvDatabaseTLSURL.
func PostgresTLSSchema(t testing.TB) string {
	t.Helper()
	return postgresSchemaAt(t, PostgresTLSURL(t), EnvDatabaseTLSURL)
}

// ClickHouseTLSAddr returns the address in EnvClickHouseTLSAddr, failing the
// test when it is not set.
func ClickHouseTLSAddr(t testing.TB) string {
	t.Helper()
	return secureEnv(t, EnvClickHouseTLSAddr, "CLICKHOUSE_TLS_CERTS=CERTDIR scripts/clickhouse.sh start DIR")
}

// ClickHouseTLSDatabase is ClickHouseDatabase on the server's TLS port,
// reached with the test CA and client certificate.
func ClickHouseTLSDatabase(t testing.TB) (addr, database string) {
	t.Helper()
	addr = ClickHouseTLSAddr(t)
	certs := TLSCerts(t)
	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatalf("reading the test CA: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate", certs.CA)
	}
	pair, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatalf("loading the test client certificate: %v", err)
	}
	tc := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return addr, clickHouseDatabaseAt(t, addr, tc)
}

func secureEnv(t testing.TB, name, start string) string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		t.Fatalf("%s is not set: run `make test`, or write certificates with `scripts/certs.sh CERTDIR`, start the server with `%s` and export what it prints (and %s=CERTDIR)",
			name, start, EnvTLSCerts)
	}
	return v
}
