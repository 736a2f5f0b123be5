package httpapi_test

import (
	"context"
	"crypto/tls"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/internal/certfile"
	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/internal/testenv"
)

type tlsBundle struct {
	ca                *testenv.CA
	certFile, keyFile string
	addr              string
	hits              *atomic.Int64 // requests that reached the handler
	logs              *observer.ObservedLogs
}

// tlsServer serves "ok" over TLS from certificate files in a directory of
// its own, re-read every 20ms, with clientCA (if not nil) required of
// clients.
func tlsServer(t *testing.T, clientCA *testenv.CA) *tlsBundle {
	t.Helper()
	dir := t.TempDir()
	b := &tlsBundle{ca: testenv.NewCA(t), hits: &atomic.Int64{}}
	b.certFile, b.keyFile = b.ca.Server(t).Write(t, dir, "server")
	files := certfile.ServerFiles{CertFile: b.certFile, KeyFile: b.keyFile}
	if clientCA != nil {
		files.ClientCAFile = filepath.Join(dir, "client-ca.crt")
		testenv.WriteFile(t, files.ClientCAFile, clientCA.CertPEM)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	b.logs = logs
	tc, err := certfile.ServerConfig(files, 20*time.Millisecond, zap.New(core))
	require.NoError(t, err)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b.hits.Add(1)
		_, _ = io.WriteString(w, "ok")
	})
	srv := httpapi.NewServer(httpapi.ServerConfig{Name: "test", Addr: "127.0.0.1:0", TLS: tc}, h, nil, nil)
	require.NoError(t, srv.Start(context.Background()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	b.addr = srv.Addr().String()
	return b
}

// served is the serial of the certificate a new connection is served,
// verified against the test's CA.
func (b *tlsBundle) served(t *testing.T) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", b.addr, &tls.Config{RootCAs: b.ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// get sends one HTTPS request with cfg and returns the body.
func (b *tlsBundle) get(cfg *tls.Config) (string, error) {
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + b.addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// waitLog waits for the n-th log entry whose message is msg.
func (b *tlsBundle) waitLog(t *testing.T, msg string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		// Each look is a handshake, and handshakes are what read the files.
		_ = b.served(t)
		return b.logs.FilterMessage(msg).Len() >= n
	}, 10*time.Second, 10*time.Millisecond, "no %q log entry", msg)
}

// The certificate is served from its files and replaced without a restart
// when they change; a replacement that cannot be used is refused and the
// last good certificate goes on being served.
func TestTLSCertificateReload(t *testing.T) {
	t.Parallel()
	b := tlsServer(t, nil)
	first := b.served(t)
	body, err := b.get(&tls.Config{RootCAs: b.ca.Pool(), MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	require.Equal(t, "ok", body)

	renewed := b.ca.Server(t)
	require.NotEqual(t, first, renewed.Serial)
	renewed.Write(t, filepath.Dir(b.certFile), "server")
	require.Eventually(t, func() bool { return b.served(t).Cmp(renewed.Serial) == 0 },
		10*time.Second, 10*time.Millisecond, "the renewed certificate is served without a restart")

	// A certificate with another certificate's key.
	mismatched := b.ca.Server(t)
	testenv.WriteFile(t, b.certFile, mismatched.CertPEM)
	b.waitLog(t, "tls certificate not reloaded; serving the previous one", 1)
	require.Equal(t, renewed.Serial, b.served(t), "a certificate whose key does not match is refused")

	// Not PEM at all.
	testenv.WriteFile(t, b.certFile, []byte("not a certificate\n"))
	testenv.WriteFile(t, b.keyFile, []byte("not a key\n"))
	b.waitLog(t, "tls certificate not reloaded; serving the previous one", 2)
	require.Equal(t, renewed.Serial, b.served(t), "garbage is refused")

	// A good pair after the bad ones is taken up again.
	third := b.ca.Server(t)
	third.Write(t, filepath.Dir(b.certFile), "server")
	require.Eventually(t, func() bool { return b.served(t).Cmp(third.Serial) == 0 },
		10*time.Second, 10*time.Millisecond, "a good pair after a refused one is served")
	require.Equal(t, 2, b.logs.FilterMessage("tls certificate reloaded").Len())
}

// A TLS port answers a plain HTTP request with an error and never hands it
// to the API.
func TestPlainHTTPToTLSPortFails(t *testing.T) {
	t.Parallel()
	b := tlsServer(t, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + b.addr + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(body), "HTTPS")
	require.Zero(t, b.hits.Load(), "the handler never saw the plain request")
}

// TLS 1.0 and 1.1 are refused.
func TestTLSMinimumVersion(t *testing.T) {
	t.Parallel()
	b := tlsServer(t, nil)
	_, err := b.get(&tls.Config{RootCAs: b.ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}) //nolint:gosec // the point of the test
	require.ErrorContains(t, err, "protocol version")
	body, err := b.get(&tls.Config{RootCAs: b.ca.Pool(), MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12})
	require.NoError(t, err)
	require.Equal(t, "ok", body)
	require.Equal(t, int64(1), b.hits.Load())
}

// With a client CA, only a client whose certificate that CA issued gets a
// request through.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	clients := testenv.NewCA(t)
	b := tlsServer(t, clients)
	trust := func(c *testenv.Issued) *tls.Config {
		cfg := &tls.Config{RootCAs: b.ca.Pool(), MinVersion: tls.VersionTLS12}
		if c != nil {
			pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
			require.NoError(t, err)
			cfg.Certificates = []tls.Certificate{pair}
		}
		return cfg
	}

	_, err := b.get(trust(nil))
	require.ErrorContains(t, err, "certificate required", "no client certificate")
	stranger := testenv.NewCA(t).Client(t, "stranger")
	_, err = b.get(trust(&stranger))
	require.ErrorContains(t, err, "unknown certificate authority", "a client certificate from another CA")
	require.Zero(t, b.hits.Load())

	known := clients.Client(t, "ingest-client")
	body, err := b.get(trust(&known))
	require.NoError(t, err)
	require.Equal(t, "ok", body)
	require.Equal(t, int64(1), b.hits.Load())
}
