package pgxstats_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/telemetry"
	"github.com/doclog/doclog/internal/telemetry/pgxstats"
	"github.com/doclog/doclog/internal/testenv"
)

func newPool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresSchema(t))
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// values gathers reg and returns each series' value, keyed by name, checking
// that every series carries the expected pool label.
func values(t *testing.T, reg *prometheus.Registry, pool string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		require.Len(t, f.Metric, 1, f.GetName())
		m := f.Metric[0]
		for _, l := range m.Label {
			if l.GetName() == "pool" {
				require.Equal(t, pool, l.GetValue())
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			out[f.GetName()] = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			out[f.GetName()] = m.GetGauge().GetValue()
		default:
			t.Fatalf("unexpected type %s for %s", f.GetType(), f.GetName())
		}
	}
	return out
}

func TestPoolCollector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, 3)
	reg := prometheus.NewRegistry()
	require.NoError(t, telemetry.Register(reg, pgxstats.NewPoolCollector(pool, "log")))

	v := values(t, reg, "log")
	require.Len(t, v, 13, "every pool statistic is exported")
	require.Equal(t, 3.0, v["doclog_pgxpool_max_conns"])
	require.Equal(t, 0.0, v["doclog_pgxpool_acquires_total"])

	// Hold every connection, then make one more acquire wait until it is
	// canceled: the series must show the pool exhausted.
	var held []*pgxpool.Conn
	for range 3 {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, c.Ping(ctx))
		held = append(held, c)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := pool.Acquire(waitCtx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	v = values(t, reg, "log")
	require.Equal(t, 3.0, v["doclog_pgxpool_acquires_total"])
	require.Equal(t, 3.0, v["doclog_pgxpool_acquired_conns"])
	require.Equal(t, 3.0, v["doclog_pgxpool_total_conns"])
	require.Equal(t, 0.0, v["doclog_pgxpool_idle_conns"])
	require.Equal(t, 3.0, v["doclog_pgxpool_new_conns_total"])
	require.Equal(t, 1.0, v["doclog_pgxpool_canceled_acquires_total"])
	require.GreaterOrEqual(t, v["doclog_pgxpool_empty_acquires_total"], 3.0, "each first acquire found the pool empty")
	require.Greater(t, v["doclog_pgxpool_acquire_seconds_total"], 0.0)

	// A release lets a waiting acquire through; its wait is counted.
	done := make(chan error, 1)
	go func() {
		c, err := pool.Acquire(ctx)
		if err == nil {
			c.Release()
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	held[0].Release()
	require.NoError(t, <-done)
	for _, c := range held[1:] {
		c.Release()
	}

	v = values(t, reg, "log")
	require.Equal(t, 4.0, v["doclog_pgxpool_acquires_total"])
	require.Equal(t, 0.0, v["doclog_pgxpool_acquired_conns"])
	require.Equal(t, 3.0, v["doclog_pgxpool_idle_conns"])
	require.Equal(t, 3.0, v["doclog_pgxpool_new_conns_total"], "the waiter reused a released connection")
	require.GreaterOrEqual(t, v["doclog_pgxpool_empty_acquire_wait_seconds_total"], 0.04)
}

func TestOldestTransactionAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, 4)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// xact_start is set by the transaction's first statement.
	_, err = tx.Exec(ctx, "SELECT 1")
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond)

	age, err := pgxstats.OldestTransactionAge(ctx, pool)
	require.NoError(t, err)
	require.GreaterOrEqual(t, age, time.Second, "the idle-in-transaction session counts")
	require.Less(t, age, 10*time.Minute)

	reg := prometheus.NewRegistry()
	require.NoError(t, telemetry.Register(reg, pgxstats.NewOldestTransactionCollector(pool, 0)))
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	require.Equal(t, "doclog_postgres_oldest_transaction_seconds", families[0].GetName())
	require.GreaterOrEqual(t, families[0].Metric[0].GetGauge().GetValue(), 1.0)
}

func TestOldestTransactionCollectorReportsQueryFailure(t *testing.T) {
	t.Parallel()
	pool := newPool(t, 1)
	pool.Close()
	reg := prometheus.NewRegistry()
	require.NoError(t, telemetry.Register(reg, pgxstats.NewOldestTransactionCollector(pool, time.Second)))
	_, err := reg.Gather()
	require.ErrorContains(t, err, "querying the oldest transaction's age")
}
