package postgres_test

import (
	"context"
	"crypto/x509"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
)

// TestVerifyFull opens the store on a server that takes TCP connections
// over TLS with a password only, with nothing but sslmode=verify-full and
// sslrootcert in the URL, and writes and reads a job result through it.
func TestVerifyFull(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	store, err := postgres.Open(ctx, testenv.PostgresTLSSchema(t))
	require.NoError(t, err)
	defer store.Close()
	_, err = postgres.Migrate(ctx, store.Pool())
	require.NoError(t, err)

	res, err := store.Append(ctx, []oplog.AppendRequest{{
		DocumentID: "doc-tls",
		Jobs:       []oplog.JobOutcome{{JobID: "job-tls", Status: oplog.JobFailed, ErrorHistory: []oplog.ErrorInfo{{Name: "X", Message: "y"}}}},
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	got, err := store.JobResults(ctx, []string{"job-tls"})
	require.NoError(t, err)
	require.Equal(t, oplog.JobFailed, got["job-tls"].Status)

	var ssl bool
	var version string
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl, &version))
	require.True(t, ssl, "the session is not encrypted")
	require.Contains(t, []string{"TLSv1.2", "TLSv1.3"}, version)
}

// TestVerifyFullRefuses checks that verify-full refuses a server whose
// certificate does not chain to the given CA, or does not name the host
// connected to, and that the server refuses a connection without TLS.
func TestVerifyFullRefuses(t *testing.T) {
	t.Parallel()
	base := testenv.PostgresTLSURL(t)
	untrusted := filepath.Join(t.TempDir(), "untrusted-ca.pem")
	testenv.WriteFile(t, untrusted, testenv.NewCA(t).CertPEM)
	withParam := func(t *testing.T, key, value string) string {
		u, err := url.Parse(base)
		require.NoError(t, err)
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}

	t.Run("untrusted CA", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, err := postgres.Open(ctx, withParam(t, "sslrootcert", untrusted))
		var unknown x509.UnknownAuthorityError
		require.ErrorAs(t, err, &unknown)
	})

	t.Run("host not in the certificate", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		// The same server under a name its certificate does not carry:
		// the name is resolved to the server's address here, so only the
		// certificate check can tell.
		u, err := url.Parse(base)
		require.NoError(t, err)
		addr := u.Hostname()
		u.Host = "doclog-elsewhere.invalid:" + u.Port()
		cfg, err := pgxpool.ParseConfig(u.String())
		require.NoError(t, err)
		cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) { return []string{addr}, nil }
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		defer pool.Close()
		err = pool.Ping(ctx)
		var wrongHost x509.HostnameError
		require.ErrorAs(t, err, &wrongHost)
		require.Equal(t, "doclog-elsewhere.invalid", wrongHost.Host)

		// verify-ca checks the chain alone, and connects: the name is
		// all that failed above.
		q := u.Query()
		q.Set("sslmode", "verify-ca")
		u.RawQuery = q.Encode()
		cfg, err = pgxpool.ParseConfig(u.String())
		require.NoError(t, err)
		cfg.ConnConfig.LookupFunc = func(context.Context, string) ([]string, error) { return []string{addr}, nil }
		pool, err = pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		defer pool.Close()
		require.NoError(t, pool.Ping(ctx))
	})

	t.Run("no TLS", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, err := postgres.Open(ctx, withParam(t, "sslmode", "disable"))
		require.ErrorContains(t, err, "no encryption")
	})
}
