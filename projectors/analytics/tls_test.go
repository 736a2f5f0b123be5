package analytics_test

import (
	"context"
	"crypto/x509"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/projectors/analytics"
)

// tlsURL is a CLICKHOUSE_URL for the test server's TLS port and database
// db, with the given query parameters beside secure=true.
func tlsURL(t *testing.T, db string, params map[string]string) string {
	t.Helper()
	q := url.Values{"secure": {"true"}}
	for k, v := range params {
		q.Set(k, v)
	}
	return (&url.URL{Scheme: "clickhouse", Host: testenv.ClickHouseTLSAddr(t), Path: "/" + db, RawQuery: q.Encode()}).String()
}

// TestTLSWithClientCertificate connects the projector to ClickHouse's TLS
// port, which refuses clients without a certificate, configured from a URL
// alone: it creates its tables there, and queries run.
func TestTLSWithClientCertificate(t *testing.T) {
	t.Parallel()
	certs := testenv.TLSCerts(t)
	_, db := testenv.ClickHouseTLSDatabase(t)
	cfg, err := analytics.ParseURL(tlsURL(t, db, map[string]string{
		"tls_ca_file":   certs.CA,
		"tls_cert_file": certs.ClientCert,
		"tls_key_file":  certs.ClientKey,
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := analytics.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	require.Equal(t, uint64(0), scalar(t, p, "SELECT count() FROM "+db+".operations"))
	require.Equal(t, uint64(2), scalar(t, p, "SELECT count() FROM system.tables WHERE database = ?", db))
}

// TestTLSRefuses checks that the projector cannot connect to the TLS port
// without a client certificate, or when it does not trust the server's CA.
func TestTLSRefuses(t *testing.T) {
	t.Parallel()
	certs := testenv.TLSCerts(t)
	untrusted := filepath.Join(t.TempDir(), "untrusted-ca.pem")
	testenv.WriteFile(t, untrusted, testenv.NewCA(t).CertPEM)
	connect := func(t *testing.T, params map[string]string) error {
		cfg, err := analytics.ParseURL(tlsURL(t, "default", params))
		require.NoError(t, err)
		cfg.DialTimeout = 5 * time.Second
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		p, err := analytics.NewReader(ctx, cfg)
		if err == nil {
			_ = p.Close()
		}
		return err
	}

	t.Run("no client certificate", func(t *testing.T) {
		t.Parallel()
		err := connect(t, map[string]string{"tls_ca_file": certs.CA})
		// Under TLS 1.3 the client's half of the handshake ends before
		// the server has checked for a certificate, so its refusal comes
		// as the alert or, when the hello is still being written, as the
		// connection it closed.
		require.Error(t, err)
		require.Regexp(t, `remote error: tls: certificate required|connection reset by peer|broken pipe`, err.Error())
	})
	t.Run("untrusted CA", func(t *testing.T) {
		t.Parallel()
		err := connect(t, map[string]string{"tls_ca_file": untrusted, "tls_cert_file": certs.ClientCert, "tls_key_file": certs.ClientKey})
		var unknown x509.UnknownAuthorityError
		require.ErrorAs(t, err, &unknown)
	})
	t.Run("system roots only", func(t *testing.T) {
		t.Parallel()
		err := connect(t, map[string]string{"tls_cert_file": certs.ClientCert, "tls_key_file": certs.ClientKey})
		var unknown x509.UnknownAuthorityError
		require.ErrorAs(t, err, &unknown)
	})
}
