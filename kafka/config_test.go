package kafka_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/kafka"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := kafka.Config{Seeds: []string{"localhost:9092"}, SASL: kafka.SASLConfig{Mechanism: "scram-sha-512", Username: "u", Password: "p"}}.WithDefaults()
	require.Equal(t, kafka.DefaultClientID, c.ClientID)
	require.Equal(t, kafka.DefaultDialTimeout, c.DialTimeout)
	require.Equal(t, kafka.DefaultLogLevel, c.LogLevel)
	require.Equal(t, kafka.SASLScramSHA512, c.SASL.Mechanism)
	require.NoError(t, c.Validate())
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := kafka.Config{Seeds: []string{"localhost:9092"}}
	for _, tc := range []struct {
		name   string
		mutate func(*kafka.Config)
		want   string
	}{
		{"no seeds", func(c *kafka.Config) { c.Seeds = nil }, "kafka seeds are required"},
		{"seed without port", func(c *kafka.Config) { c.Seeds = []string{"localhost"} }, `kafka seed "localhost" is not host:port`},
		{"bad log level", func(c *kafka.Config) { c.LogLevel = "loud" }, `kafka log level "loud"`},
		{"cert without key", func(c *kafka.Config) { c.TLS = kafka.TLSConfig{Enabled: true, CertFile: "c.pem"} }, "both a certificate file and a key file"},
		{"tls options without tls", func(c *kafka.Config) { c.TLS.CAFile = "ca.pem" }, "tls is not enabled"},
		{"credentials without mechanism", func(c *kafka.Config) { c.SASL.Username = "u" }, "no sasl mechanism"},
		{"mechanism without password", func(c *kafka.Config) { c.SASL = kafka.SASLConfig{Mechanism: kafka.SASLPlain, Username: "u"} }, "kafka sasl PLAIN needs a username and a password"},
		{"unknown mechanism", func(c *kafka.Config) { c.SASL = kafka.SASLConfig{Mechanism: "GSSAPI", Username: "u", Password: "p"} }, `kafka sasl mechanism "GSSAPI"`},
		{"negative dial timeout", func(c *kafka.Config) { c.DialTimeout = -time.Second }, "kafka dial timeout must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := ok
			tc.mutate(&c)
			err := c.WithDefaults().Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			_, err = c.Options(nil)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestOptionsTLSAndSASL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir)
	for _, mech := range []kafka.SASLMechanism{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		c := kafka.Config{
			Seeds: []string{"127.0.0.1:9093"},
			TLS:   kafka.TLSConfig{Enabled: true, CAFile: certFile, CertFile: certFile, KeyFile: keyFile},
			SASL:  kafka.SASLConfig{Mechanism: mech, Username: "doclog", Password: "secret"},
		}
		opts, err := c.Options(nil)
		require.NoError(t, err, mech)
		// seeds, client id, dial timeout, retry backoff, tls, sasl
		require.Len(t, opts, 6, mech)
		cl, err := kgo.NewClient(opts...)
		require.NoError(t, err)
		require.Equal(t, []string{"doclog"}, []string{cl.OptValue(kgo.ClientID).(string)})
		cl.Close()
	}

	_, err := kafka.Config{Seeds: []string{"h:1"}, TLS: kafka.TLSConfig{Enabled: true, CAFile: filepath.Join(dir, "missing.pem")}}.Options(nil)
	require.ErrorContains(t, err, "read kafka tls ca file")
	_, err = kafka.Config{Seeds: []string{"h:1"}, TLS: kafka.TLSConfig{Enabled: true, CAFile: keyFile}}.Options(nil)
	require.ErrorContains(t, err, "holds no PEM certificate")
}

// TestNewClientLogsThroughZap checks that franz-go's logging lands in the
// given zap logger, named "kafka".
func TestNewClientLogsThroughZap(t *testing.T) {
	t.Parallel()
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer fake.Close()
	core, logs := observer.New(zap.DebugLevel)
	cl, err := kafka.NewClient(kafka.Config{Seeds: fake.ListenAddrs(), LogLevel: kafka.LogDebug}, zap.New(core))
	require.NoError(t, err)
	require.NoError(t, cl.Ping(t.Context()))
	cl.Close()
	require.NotZero(t, logs.FilterLoggerName("kafka").Len())
}

func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "doclog-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile = filepath.Join(dir, "cert.pem")
	keyFile = filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}
