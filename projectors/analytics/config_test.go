package analytics_test

import (
	"crypto/tls"
	"errors"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/projectors/analytics"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := analytics.Config{Addr: []string{"ch:9000"}}.WithDefaults()
	require.Equal(t, "analytics", c.Name)
	require.Equal(t, "doclog", c.Database)
	require.Equal(t, "default", c.Username)
	require.Equal(t, 10*time.Second, c.DialTimeout)
	require.Equal(t, 30*time.Second, c.InsertTimeout)
	require.Equal(t, 10_000, c.BatchRows)
	require.Equal(t, time.Second, c.BatchDelay)
	require.Equal(t, int32(1<<20), c.BatchMinBytes)
	require.NoError(t, c.Validate())
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(*analytics.Config)
		field  string
	}{
		{"no address", func(c *analytics.Config) { c.Addr = nil }, "addr"},
		{"address without port", func(c *analytics.Config) { c.Addr = []string{"ch"} }, "addr"},
		{"database with a dot", func(c *analytics.Config) { c.Database = "a.b" }, "database"},
		{"database starting with a digit", func(c *analytics.Config) { c.Database = "1db" }, "database"},
		{"negative insert timeout", func(c *analytics.Config) { c.InsertTimeout = -time.Second }, "insert timeout"},
		{"negative batch rows", func(c *analytics.Config) { c.BatchRows = -1 }, "batch rows"},
		{"batch delay too short", func(c *analytics.Config) { c.BatchDelay = time.Millisecond }, "batch delay"},
		{"batch delay too long", func(c *analytics.Config) { c.BatchDelay = time.Hour }, "batch delay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := analytics.Config{Addr: []string{"ch:9000"}}
			tc.mutate(&c)
			err := c.WithDefaults().Validate()
			var ce *analytics.ConfigError
			require.True(t, errors.As(err, &ce), "got %v", err)
			require.Equal(t, tc.field, ce.Field)
		})
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	c, err := analytics.ParseURL("clickhouse://reader:s3cret@ch1,ch2:9001/stats?secure=true&create_database=1")
	require.NoError(t, err)
	require.Equal(t, []string{"ch1:9440", "ch2:9001"}, c.Addr)
	require.Equal(t, "reader", c.Username)
	require.Equal(t, "s3cret", c.Password)
	require.Equal(t, "stats", c.Database)
	require.True(t, c.CreateDatabase)
	require.NotNil(t, c.TLS)
	require.NoError(t, c.WithDefaults().Validate())

	c, err = analytics.ParseURL("tcp://ch")
	require.NoError(t, err)
	require.Equal(t, []string{"ch:9000"}, c.Addr)
	require.Nil(t, c.TLS)
	require.Equal(t, "doclog", c.WithDefaults().Database)

	for _, bad := range []string{"http://ch:8123", "clickhouse://ch?secure=maybe", "::"} {
		_, err := analytics.ParseURL(bad)
		var ce *analytics.ConfigError
		require.True(t, errors.As(err, &ce), "%s: got %v", bad, err)
	}
}

// TestParseURLTLS reads the TLS parameters into the Config's tls.Config and
// refuses those that cannot work before any connection is tried.
func TestParseURLTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testenv.NewCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	testenv.WriteFile(t, caFile, ca.CertPEM)
	certFile, keyFile := ca.Client(t, "doclog").Write(t, dir, "client")
	_, otherKey := ca.Client(t, "other").Write(t, dir, "other")
	tlsURL := func(params string) string { return "clickhouse://ch/doclog?" + params }

	c, err := analytics.ParseURL(tlsURL(url.Values{
		"secure": {"true"}, "tls_ca_file": {caFile}, "tls_cert_file": {certFile}, "tls_key_file": {keyFile}, "tls_server_name": {"ch.internal"},
	}.Encode()))
	require.NoError(t, err)
	require.Equal(t, []string{"ch:9440"}, c.Addr)
	require.NotNil(t, c.TLS)
	require.True(t, c.TLS.RootCAs.Equal(ca.Pool()), "the CA file is the only trust")
	require.Len(t, c.TLS.Certificates, 1)
	require.Equal(t, "ch.internal", c.TLS.ServerName)
	require.Equal(t, uint16(tls.VersionTLS12), c.TLS.MinVersion)
	require.False(t, c.TLS.InsecureSkipVerify)

	c, err = analytics.ParseURL(tlsURL("secure=true"))
	require.NoError(t, err)
	require.Nil(t, c.TLS.RootCAs, "without tls_ca_file the system's roots are trusted")
	require.Empty(t, c.TLS.Certificates)

	for _, tc := range []struct{ params, reason string }{
		{url.Values{"tls_ca_file": {caFile}}.Encode(), "parameter tls_ca_file needs secure=true"},
		{url.Values{"secure": {"true"}, "tls_cert_file": {certFile}}.Encode(), "tls_cert_file and tls_key_file go together"},
		{url.Values{"secure": {"true"}, "tls_key_file": {keyFile}}.Encode(), "tls_cert_file and tls_key_file go together"},
		{url.Values{"secure": {"true"}, "tls_ca_file": {filepath.Join(dir, "missing.pem")}}.Encode(), "no such file"},
		{url.Values{"secure": {"true"}, "tls_ca_file": {keyFile}}.Encode(), "holds no PEM certificate"},
		{url.Values{"secure": {"true"}, "skip_verify": {"true"}, "tls_ca_file": {caFile}}.Encode(), "ignored with skip_verify=true"},
		{url.Values{"secure": {"true"}, "tls_cert_file": {certFile}, "tls_key_file": {otherKey}}.Encode(), "private key does not match public key"},
	} {
		_, err := analytics.ParseURL(tlsURL(tc.params))
		var ce *analytics.ConfigError
		require.True(t, errors.As(err, &ce), "%s: got %v", tc.params, err)
		require.Equal(t, "url", ce.Field)
		require.Contains(t, ce.Reason, tc.reason, tc.params)
	}
}
