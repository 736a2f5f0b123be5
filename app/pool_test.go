package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/connflags"
	"github.com/doclog/doclog/internal/testenv"
)

// The database flags of serve reach the pool's configuration, over what
// the URL says of the pool, and a pool built from it reaches a real
// Postgres; left alone they are connflags' defaults.
func TestDatabasePoolFlags(t *testing.T) {
	t.Parallel()
	url := testenv.PostgresSchema(t)
	s, _, err := bind(t, "--database-url="+url+"&pool_max_conn_idle_time=1s", "--database-max-conns=6", "--database-min-conns=2",
		"--database-max-conn-lifetime=2h", "--database-max-conn-idle-time=90s", "--database-health-check-period=15s",
		"--database-connect-timeout=4s")
	require.NoError(t, err)
	require.NoError(t, s.Validate())
	cfg, err := s.PoolConfig()
	require.NoError(t, err)
	require.EqualValues(t, 6, cfg.MaxConns)
	require.EqualValues(t, 2, cfg.MinConns)
	require.Equal(t, 2*time.Hour, cfg.MaxConnLifetime)
	require.Equal(t, 90*time.Second, cfg.MaxConnIdleTime)
	require.Equal(t, 15*time.Second, cfg.HealthCheckPeriod)
	require.Equal(t, 4*time.Second, cfg.ConnConfig.ConnectTimeout)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, pool.Ping(ctx))
	require.EqualValues(t, 2, pool.Config().MinConns)

	s, _, err = bind(t)
	require.NoError(t, err)
	cfg, err = s.PoolConfig()
	require.NoError(t, err)
	require.EqualValues(t, connflags.DefaultDatabaseMinConns, cfg.MinConns)
	require.Equal(t, connflags.DefaultDatabaseMaxConnLifetime, cfg.MaxConnLifetime)
	require.Equal(t, connflags.DefaultDatabaseMaxConnIdleTime, cfg.MaxConnIdleTime)
	require.Equal(t, connflags.DefaultDatabaseHealthCheckPeriod, cfg.HealthCheckPeriod)
	require.Equal(t, connflags.DefaultDatabaseConnectTimeout, cfg.ConnConfig.ConnectTimeout)

	for arg, want := range map[string]string{
		"--database-min-conns=21":          "--database-min-conns must be between 0 and --database-max-conns (20), got 21",
		"--database-min-conns=-1":          "--database-min-conns must be between 0",
		"--database-max-conn-idle-time=0s": "must be positive",
	} {
		s, _, err := bind(t, arg)
		if err == nil {
			err = s.Validate()
		}
		require.ErrorContains(t, err, want, arg)
	}
}
