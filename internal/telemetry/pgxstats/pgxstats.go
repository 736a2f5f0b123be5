// Package pgxstats exposes a pgx connection pool and the Postgres server's
// oldest open transaction as Prometheus series.
//
// It imports pgx, and pgx may only be imported by the Postgres stores
// (log/postgres, the projectors' stores) and the command that builds their
// pools: import this package from those places only. That is why it is not
// part of internal/telemetry, which every package may import.
package pgxstats

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

const subsystem = "pgxpool"

// Stater is what the collector reads: *pgxpool.Pool satisfies it.
type Stater interface {
	Stat() *pgxpool.Stat
}

// PoolCollector is a prometheus.Collector over pgxpool.Stat, read at each
// scrape (a Stat is a cheap snapshot under the pool's lock). Every series
// carries the constant label pool, naming which of a process's pools it
// describes ("log", "docview", ...). It mirrors the seed's
// PoolInstrumentation: acquire wait is the figure that shows a pool too
// small for its workers before latency does.
type PoolCollector struct {
	pool Stater

	acquireCount         *prometheus.Desc
	acquireDuration      *prometheus.Desc
	emptyAcquireCount    *prometheus.Desc
	emptyAcquireWait     *prometheus.Desc
	canceledAcquireCount *prometheus.Desc
	acquiredConns        *prometheus.Desc
	idleConns            *prometheus.Desc
	constructingConns    *prometheus.Desc
	totalConns           *prometheus.Desc
	maxConns             *prometheus.Desc
	newConns             *prometheus.Desc
	maxLifetimeDestroy   *prometheus.Desc
	maxIdleDestroy       *prometheus.Desc
}

// NewPoolCollector returns a collector for pool, labelled pool=name.
func NewPoolCollector(pool Stater, name string) *PoolCollector {
	labels := prometheus.Labels{"pool": name}
	desc := func(metric, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("doclog", subsystem, metric), help, nil, labels)
	}
	return &PoolCollector{
		pool:                 pool,
		acquireCount:         desc("acquires_total", "Connections acquired from the pool."),
		acquireDuration:      desc("acquire_seconds_total", "Total time spent acquiring connections, successful acquires only."),
		emptyAcquireCount:    desc("empty_acquires_total", "Acquires that found no idle connection and had to wait for one or for a new one."),
		emptyAcquireWait:     desc("empty_acquire_wait_seconds_total", "Total time successful acquires waited because the pool had no idle connection."),
		canceledAcquireCount: desc("canceled_acquires_total", "Acquires canceled by their context before they got a connection."),
		acquiredConns:        desc("acquired_conns", "Connections currently lent out."),
		idleConns:            desc("idle_conns", "Connections currently idle in the pool."),
		constructingConns:    desc("constructing_conns", "Connections currently being established."),
		totalConns:           desc("total_conns", "Connections in the pool: acquired, idle and being established."),
		maxConns:             desc("max_conns", "The pool's maximum size."),
		newConns:             desc("new_conns_total", "Connections established by the pool."),
		maxLifetimeDestroy:   desc("max_lifetime_destroys_total", "Connections closed because they reached their maximum lifetime."),
		maxIdleDestroy:       desc("max_idle_destroys_total", "Connections closed because they stayed idle too long."),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

func (c *PoolCollector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{
		c.acquireCount, c.acquireDuration, c.emptyAcquireCount, c.emptyAcquireWait,
		c.canceledAcquireCount, c.acquiredConns, c.idleConns, c.constructingConns,
		c.totalConns, c.maxConns, c.newConns, c.maxLifetimeDestroy, c.maxIdleDestroy,
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(c.acquireCount, float64(s.AcquireCount()))
	counter(c.acquireDuration, s.AcquireDuration().Seconds())
	counter(c.emptyAcquireCount, float64(s.EmptyAcquireCount()))
	counter(c.emptyAcquireWait, s.EmptyAcquireWaitTime().Seconds())
	counter(c.canceledAcquireCount, float64(s.CanceledAcquireCount()))
	gauge(c.acquiredConns, float64(s.AcquiredConns()))
	gauge(c.idleConns, float64(s.IdleConns()))
	gauge(c.constructingConns, float64(s.ConstructingConns()))
	gauge(c.totalConns, float64(s.TotalConns()))
	gauge(c.maxConns, float64(s.MaxConns()))
	counter(c.newConns, float64(s.NewConnsCount()))
	counter(c.maxLifetimeDestroy, float64(s.MaxLifetimeDestroyCount()))
	counter(c.maxIdleDestroy, float64(s.MaxIdleDestroyCount()))
}

// OldestTransactionQuery measures, in seconds, how long the oldest
// transaction still open anywhere on the server has been running (0 when
// none is). The log's tail reads only below the cluster-wide xmin, so this
// age is how far the tail can be held back. The role running it
// needs pg_read_all_stats (or superuser) to see other users' sessions;
// without it the figure covers only its own.
const OldestTransactionQuery = `SELECT coalesce(extract(epoch FROM now() - min(xact_start)), 0)::float8
FROM pg_stat_activity WHERE state <> 'idle'`

// Querier runs one query returning one row; *pgxpool.Pool, *pgx.Conn and
// pgx.Tx satisfy it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// OldestTransactionAge runs OldestTransactionQuery.
func OldestTransactionAge(ctx context.Context, q Querier) (time.Duration, error) {
	var secs float64
	if err := q.QueryRow(ctx, OldestTransactionQuery).Scan(&secs); err != nil {
		return 0, fmt.Errorf("querying the oldest transaction's age: %w", err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// DefaultOldestTransactionTimeout bounds the query a scrape runs when
// NewOldestTransactionCollector is given no timeout.
const DefaultOldestTransactionTimeout = 2 * time.Second

// OldestTransactionCollector is a gauge, doclog_postgres_oldest_transaction_seconds,
// measured by a query at each scrape; a failed query is reported as an
// invalid metric, so the rest of the scrape is still served (telemetry's
// mux continues on errors) and the failure shows in the handler's error
// count. Alert when it exceeds a few minutes: a long transaction holds
// every projector's tail back.
type OldestTransactionCollector struct {
	q       Querier
	timeout time.Duration
	desc    *prometheus.Desc
}

// NewOldestTransactionCollector returns the collector; timeout 0 means
// DefaultOldestTransactionTimeout.
func NewOldestTransactionCollector(q Querier, timeout time.Duration) *OldestTransactionCollector {
	if timeout <= 0 {
		timeout = DefaultOldestTransactionTimeout
	}
	return &OldestTransactionCollector{
		q:       q,
		timeout: timeout,
		desc: prometheus.NewDesc("doclog_postgres_oldest_transaction_seconds",
			"Age of the oldest open transaction on the Postgres server; it holds the log's gap-safe tail back.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *OldestTransactionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *OldestTransactionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	age, err := OldestTransactionAge(ctx, c.q)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, age.Seconds())
}
