// Package certfile reads TLS certificates, keys and CA bundles from files. A
// server's certificate and key are re-read when the files change, so a
// certificate renewed by cert-manager, or any tool that rewrites the files,
// is served from the next handshake on without a restart.
package certfile

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// DefaultInterval is how often, at most, the files are looked at.
const DefaultInterval = 5 * time.Second

// Config names the files of a Keypair.
type Config struct {
	// CertFile is a PEM file holding the certificate, followed by any
	// intermediates. Required.
	CertFile string
	// KeyFile is a PEM file holding the certificate's private key. Required.
	KeyFile string
	// Interval is the least time between two reads of the files; they are
	// read by a handshake that comes that long after the last read, so an
	// idle server reads nothing. Default DefaultInterval.
	Interval time.Duration
	// Logger reports every certificate taken up and every replacement
	// refused. Default none.
	Logger *zap.Logger
}

// Keypair is a certificate and key read from files, re-read when the files
// change. A replacement that cannot be used (unreadable, not PEM, a key that
// does not match the certificate) is logged and the last good pair goes on
// being served. Safe for concurrent use.
type Keypair struct {
	cfg  Config
	cert atomic.Pointer[tls.Certificate]

	// mu is held by the one handshake that reads the files; the others
	// meanwhile serve the current pair rather than wait on the disk.
	mu              sync.Mutex
	next            time.Time // when the files may be read again
	certPEM, keyPEM []byte    // the contents last read, used or not
	lastErr         string    // the last failure logged, so a lasting one is logged once
}

// New reads the pair once; it fails if the files cannot be read or do not
// hold a matching certificate and key, since a server must not start
// without a certificate.
func New(cfg Config) (*Keypair, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("tls needs both a certificate file and a key file")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	k := &Keypair{cfg: cfg}
	certPEM, keyPEM, err := k.read()
	if err != nil {
		return nil, err
	}
	cert, err := parse(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the tls certificate %s and key %s: %w", cfg.CertFile, cfg.KeyFile, err)
	}
	k.certPEM, k.keyPEM = certPEM, keyPEM
	k.cert.Store(cert)
	k.next = time.Now().Add(cfg.Interval)
	return k, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (k *Keypair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.current(), nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate, for a client
// whose certificate is renewed in place.
func (k *Keypair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.current(), nil
}

// Leaf is the certificate served now.
func (k *Keypair) Leaf() *x509.Certificate { return k.cert.Load().Leaf }

func (k *Keypair) current() *tls.Certificate {
	if k.mu.TryLock() {
		if now := time.Now(); !now.Before(k.next) {
			k.next = now.Add(k.cfg.Interval)
			k.reload()
		}
		k.mu.Unlock()
	}
	return k.cert.Load()
}

// reload reads the files and takes up what they hold if it differs from
// what was read last. Comparing contents rather than modification times
// also sees a replacement that keeps the size and time, and Kubernetes'
// swap of a mounted Secret's directory link.
func (k *Keypair) reload() {
	certPEM, keyPEM, err := k.read()
	if err != nil {
		k.refused(err)
		return
	}
	if bytes.Equal(certPEM, k.certPEM) && bytes.Equal(keyPEM, k.keyPEM) {
		return
	}
	k.certPEM, k.keyPEM = certPEM, keyPEM
	cert, err := parse(certPEM, keyPEM)
	if err != nil {
		// A writer that replaces the certificate before the key leaves a
		// mismatched pair for a moment; the key's arrival changes the
		// contents again and the next read takes the pair up.
		k.refused(err)
		return
	}
	k.lastErr = ""
	k.cert.Store(cert)
	k.cfg.Logger.Info("tls certificate reloaded", zap.String("cert_file", k.cfg.CertFile),
		zap.String("serial", cert.Leaf.SerialNumber.String()), zap.Time("not_after", cert.Leaf.NotAfter))
}

func (k *Keypair) refused(err error) {
	if err.Error() == k.lastErr {
		return
	}
	k.lastErr = err.Error()
	k.cfg.Logger.Error("tls certificate not reloaded; serving the previous one", zap.String("cert_file", k.cfg.CertFile),
		zap.String("key_file", k.cfg.KeyFile), zap.String("serial", k.Leaf().SerialNumber.String()), zap.Error(err))
}

func (k *Keypair) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(k.cfg.CertFile); err != nil {
		return nil, nil, fmt.Errorf("reading the tls certificate: %w", err)
	}
	if keyPEM, err = os.ReadFile(k.cfg.KeyFile); err != nil {
		return nil, nil, fmt.Errorf("reading the tls key: %w", err)
	}
	return certPEM, keyPEM, nil
}

func parse(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing the tls certificate and key: %w", err)
	}
	return &cert, nil
}

// ServerFiles are the files of a TLS server.
type ServerFiles struct {
	// CertFile and KeyFile are the server's certificate and key, reloaded
	// as Keypair says. Required.
	CertFile, KeyFile string
	// ClientCAFile, if set, is a PEM bundle of the CAs whose client
	// certificates the server requires (mutual TLS); it is read once, at
	// start. Default: no client certificate asked for.
	ClientCAFile string
}

// ServerConfig is a server's TLS configuration from files: TLS 1.2 at
// least, the certificate reloaded as Keypair says, and with a client CA a
// verified client certificate required.
func ServerConfig(files ServerFiles, interval time.Duration, logger *zap.Logger) (*tls.Config, error) {
	kp, err := New(Config{CertFile: files.CertFile, KeyFile: files.KeyFile, Interval: interval, Logger: logger})
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.GetCertificate}
	if files.ClientCAFile != "" {
		if tc.ClientCAs, err = CAPool(files.ClientCAFile); err != nil {
			return nil, fmt.Errorf("tls client ca: %w", err)
		}
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// CAPool reads a PEM bundle of CA certificates into a pool.
func CAPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the ca bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca bundle %s holds no PEM certificate", file)
	}
	return pool, nil
}
