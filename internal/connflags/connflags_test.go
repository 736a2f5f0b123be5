package connflags_test

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
	"github.com/doclog/doclog/internal/testenv"
)

func bind(t *testing.T, args ...string) (*connflags.Connections, error) {
	t.Helper()
	var c connflags.Connections
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	connflags.Bind(fs, c.Targets(), "test")
	return &c, fs.Parse(args)
}

// --database-connect-timeout bounds an attempt at a server that accepts and
// never answers, and the error names the flag; without the flag the default
// applies, and a real Postgres is reached through the same path.
func TestDatabaseConnectTimeout(t *testing.T) {
	t.Parallel()
	silent := "postgres://doclog:x@" + testenv.SilentListener(t) + "/doclog?sslmode=disable"
	const timeout = 700 * time.Millisecond
	c, err := bind(t, "--database-url="+silent, "--database-connect-timeout="+timeout.String())
	require.NoError(t, err)
	require.Equal(t, timeout, c.DatabaseConnectTimeout)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = c.OpenLog(ctx)
	took := time.Since(start)
	require.Error(t, err)
	require.ErrorContains(t, err, "--database-connect-timeout")
	require.ErrorContains(t, err, "did not answer within 700ms")
	require.GreaterOrEqual(t, took, timeout)
	// pgx may try a second address form (an SSL retry is off here), but
	// never waits out the caller's minute.
	require.Less(t, took, 5*timeout, "the attempt outlived the connect timeout")

	// The URL's own connect_timeout wins over the flag, and the error says
	// that is what bounded it.
	start = time.Now()
	_, err = connflags.OpenLog(ctx, silent+"&connect_timeout=1", time.Hour)
	require.ErrorContains(t, err, "connect_timeout of the database URL")
	require.Less(t, time.Since(start), 10*time.Second)

	c, err = bind(t, "--database-url="+testenv.PostgresSchema(t), "--database-connect-timeout=5s")
	require.NoError(t, err)
	store, err := c.OpenLog(ctx)
	require.NoError(t, err)
	require.NoError(t, store.Ping(ctx))
	require.Equal(t, 5*time.Second, store.Pool().Config().ConnConfig.ConnectTimeout)
	store.Close()
}

// The flag's default is connflags' constant, which a Connections built in
// code gets too; 0 and negative values are refused rather than read as "no
// bound"; a connect_timeout in the URL, even 0, is left as it is.
func TestDatabaseConnectTimeoutSettings(t *testing.T) {
	t.Parallel()
	c, err := bind(t)
	require.NoError(t, err)
	require.Equal(t, connflags.DefaultDatabaseConnectTimeout, c.DatabaseConnectTimeout)
	for _, v := range []string{"0", "-1s", "soon"} {
		_, err := bind(t, "--database-connect-timeout="+v)
		require.ErrorContains(t, err, "database-connect-timeout", v)
	}
	for url, want := range map[string]time.Duration{
		"postgres://h/db":                    connflags.DefaultDatabaseConnectTimeout,
		"postgres://h/db?connect_timeout=3":  3 * time.Second,
		"postgres://h/db?connect_timeout=0":  0,
		"host=h dbname=db":                   connflags.DefaultDatabaseConnectTimeout,
		"host=h dbname=db connect_timeout=4": 4 * time.Second,
		"postgresql://h/db?sslmode=disable":  connflags.DefaultDatabaseConnectTimeout,
	} {
		cfg, err := connflags.PoolConfig(url, 0)
		require.NoError(t, err, url)
		require.Equal(t, want, cfg.ConnConfig.ConnectTimeout, url)
	}
	cfg, err := connflags.PoolConfig("postgres://h/db", 2*time.Second)
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, cfg.ConnConfig.ConnectTimeout)

	// The variable and the config file key are the flag's, as for every
	// connection setting.
	var cc connflags.Connections
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	connflags.Bind(fs, cc.Targets(), "test")
	require.NoError(t, config.ApplyEnv(fs, func(k string) (string, bool) {
		return "3s", k == "DOCLOG_DATABASE_CONNECT_TIMEOUT"
	}))
	require.Equal(t, 3*time.Second, cc.DatabaseConnectTimeout)
	require.Contains(t, connflags.Names(), connflags.DatabaseConnectTimeout)
}

// The pool's pacing has pgxpool's defaults, and what is set reaches the
// pool's configuration.
func TestPool(t *testing.T) {
	t.Parallel()
	var p connflags.Pool
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	connflags.BindPool(fs, &p)
	require.Equal(t, connflags.Pool{}.WithDefaults(), p)
	require.NoError(t, fs.Parse([]string{"--database-min-conns=3", "--database-max-conn-lifetime=2h",
		"--database-max-conn-idle-time=90s", "--database-health-check-period=15s"}))
	cfg, err := connflags.PoolConfig("postgres://h/db?pool_max_conn_lifetime=5m", 0)
	require.NoError(t, err)
	p.Apply(cfg)
	require.EqualValues(t, 3, cfg.MinConns)
	require.Equal(t, 2*time.Hour, cfg.MaxConnLifetime)
	require.Equal(t, 90*time.Second, cfg.MaxConnIdleTime)
	require.Equal(t, 15*time.Second, cfg.HealthCheckPeriod)
	require.ErrorContains(t, fs.Parse([]string{"--database-health-check-period=0"}), "must be positive")

	cfg, err = connflags.PoolConfig("postgres://h/db", 0)
	require.NoError(t, err)
	connflags.Pool{}.Apply(cfg)
	require.Equal(t, connflags.DefaultDatabaseMaxConnLifetime, cfg.MaxConnLifetime)
	require.Equal(t, connflags.DefaultDatabaseMaxConnIdleTime, cfg.MaxConnIdleTime)
	require.Equal(t, connflags.DefaultDatabaseHealthCheckPeriod, cfg.HealthCheckPeriod)
	require.EqualValues(t, connflags.DefaultDatabaseMinConns, cfg.MinConns)
}
