package certfile_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/doclog/doclog/internal/certfile"
	"github.com/doclog/doclog/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A server does not start without a usable certificate: every way the
// files can be wrong at start is an error naming what is wrong.
func TestStartRefusesUnusableFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testenv.NewCA(t)
	certFile, keyFile := ca.Server(t).Write(t, dir, "a")
	_, otherKey := ca.Server(t).Write(t, dir, "b")
	notPEM := filepath.Join(dir, "not.pem")
	testenv.WriteFile(t, notPEM, []byte("hello\n"))
	missing := filepath.Join(dir, "missing.crt")

	for name, tc := range map[string]struct {
		files certfile.ServerFiles
		want  string
	}{
		"no key":             {certfile.ServerFiles{CertFile: certFile}, "both a certificate file and a key file"},
		"missing cert":       {certfile.ServerFiles{CertFile: missing, KeyFile: keyFile}, "reading the tls certificate: open " + missing},
		"missing key":        {certfile.ServerFiles{CertFile: certFile, KeyFile: missing}, "reading the tls key: open " + missing},
		"mismatched key":     {certfile.ServerFiles{CertFile: certFile, KeyFile: otherKey}, "private key does not match public key"},
		"client CA missing":  {certfile.ServerFiles{CertFile: certFile, KeyFile: keyFile, ClientCAFile: missing}, "tls client ca: reading the ca bundle: open " + missing},
		"client CA not PEM":  {certfile.ServerFiles{CertFile: certFile, KeyFile: keyFile, ClientCAFile: notPEM}, "holds no PEM certificate"},
		"cert not PEM":       {certfile.ServerFiles{CertFile: notPEM, KeyFile: keyFile}, "parsing the tls certificate and key"},
		"key is not the key": {certfile.ServerFiles{CertFile: certFile, KeyFile: certFile}, "parsing the tls certificate and key"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := certfile.ServerConfig(tc.files, 0, nil)
			require.ErrorContains(t, err, tc.want)
		})
	}

	tc, err := certfile.ServerConfig(certfile.ServerFiles{CertFile: certFile, KeyFile: keyFile}, 0, nil)
	require.NoError(t, err)
	cert, err := tc.GetCertificate(nil)
	require.NoError(t, err)
	require.Equal(t, "localhost", cert.Leaf.Subject.CommonName)
	require.Equal(t, uint16(0x0303), tc.MinVersion, "TLS 1.2 at least")
	require.Nil(t, tc.ClientCAs, "no client certificate asked for without a client CA")
}
