package servicecli

import (
	"bytes"
	"crypto/tls"
	"io"
	"math/big"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// `doclog serve` with --tls-cert-file and --tls-key-file serves its APIs over
// HTTPS only, and with --ops-tls-enabled its ops port too; with
// --tls-client-ca-file the API requires a client certificate and the ops
// port does not. Renewed files are served without a restart.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	dir := t.TempDir()
	ca, clients := testenv.NewCA(t), testenv.NewCA(t)
	first := ca.Server(t)
	certFile, keyFile := first.Write(t, dir, "server")
	clientCA := filepath.Join(dir, "clients.crt")
	testenv.WriteFile(t, clientCA, clients.CertPEM)

	kenv := testenv.Kafka(t)
	p := startServe(t, bin, "--roles=ingest,readstore", "--migrate=auto", "--database-url", testenv.PostgresSchema(t),
		"--kafka-seeds", strings.Join(kenv.Config.Seeds, ","), "--topics-prefix", kenv.Topics.Prefix, "--topics-jobs-partitions", "1",
		"--ingest-addr", "127.0.0.1:0", "--readstore-addr", "127.0.0.1:0", "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-client-ca-file", clientCA, "--ops-tls-enabled")
	serving := p.awaitLog(t, "doclog serving", 3*time.Minute)
	apis := []string{serving["ingest"].(string), serving["readstore"].(string)}

	client := clients.Client(t, "reader")
	pair, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	require.NoError(t, err)
	withCert := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	noCert := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}

	for _, api := range apis {
		code, serial, err := httpsGet("https://"+api+"/healthz", withCert)
		require.NoError(t, err, p.output())
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, first.Serial, serial)
		_, _, err = httpsGet("https://"+api+"/healthz", noCert)
		require.Error(t, err, "the API at %s requires a client certificate", api)
	}

	code, serial, err := httpsGet("https://"+p.ops+"/readyz", noCert)
	require.NoError(t, err, "the ops port asks for no client certificate")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, first.Serial, serial)

	for _, addr := range append(apis, p.ops) {
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/healthz")
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to %s", addr)
	}

	renewed := ca.Server(t)
	renewed.Write(t, dir, "server")
	require.Eventually(t, func() bool {
		for _, url := range []string{"https://" + apis[0], "https://" + apis[1], "https://" + p.ops} {
			cfg := withCert
			if url == "https://"+p.ops {
				cfg = noCert
			}
			if _, serial, err := httpsGet(url+"/healthz", cfg); err != nil || serial.Cmp(renewed.Serial) != 0 {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "the renewed certificate is served on every port without a restart:\n%s", p.output())
	p.requireStops(t, time.Minute)
}

// A certificate without its key is a configuration error, and so is a
// certificate that cannot be read: `doclog serve` exits at once naming it.
func TestServeTLSConfigurationErrors(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	dir := t.TempDir()
	certFile, _ := testenv.NewCA(t).Server(t).Write(t, dir, "server")
	missing := filepath.Join(dir, "missing.key")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert-file", certFile}, "--tls-cert-file and --tls-key-file go together"},
		{[]string{"--ops-tls-enabled"}, "--ops-tls-enabled need --tls-cert-file and --tls-key-file"},
		{[]string{"--tls-cert-file", certFile, "--tls-key-file", missing}, "reading the tls key: open " + missing},
	} {
		cmd := exec.Command(bin, append([]string{"serve", "--ops-addr", "127.0.0.1:0", "--roles=readstore",
			"--database-url", "postgres://doclog@127.0.0.1:9/doclog"}, c.args...)...)
		cmd.Env = serveEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := runBounded(t, cmd)
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v: %s", c.args, stderr.String())
		require.Equal(t, 1, exit.ExitCode())
		require.Contains(t, stderr.String(), c.want)
	}
}

// httpsGet sends one request on a new connection and returns the status
// and the serial of the certificate the server presented.
func httpsGet(url string, cfg *tls.Config) (int, *big.Int, error) {
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.TLS.PeerCertificates[0].SerialNumber, nil
}
