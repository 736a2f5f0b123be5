// Package lagmetrics exports consumer-group lag per partition, in records
// and in seconds, as Prometheus gauges. franz-go's kprom plugin has no lag
// (a client does not know its group's committed offsets across members), so
// the collector asks the brokers, through the same code as `doclogctl
// status`, and caches the answer so frequent scrapes do not hammer them.
package lagmetrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/doclog/doclog/kafka"
)

// Collector reports the lag of a fixed set of consumer groups.
type Collector struct {
	cfg     kafka.Config
	groups  []string
	ttl     time.Duration
	timeout time.Duration
	logger  *zap.Logger

	records, seconds *prometheus.Desc
	errors           prometheus.Counter

	mu      sync.Mutex
	at      time.Time
	lags    []kafka.PartitionLag
	measure func(ctx context.Context) ([]kafka.PartitionLag, error)
}

// New returns a collector of groups' lag, measured at most once per ttl
// (default 10s when zero).
func New(cfg kafka.Config, groups []string, ttl time.Duration, logger *zap.Logger) *Collector {
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	labels := []string{"group", "topic", "partition"}
	c := &Collector{
		cfg: cfg, groups: groups, ttl: ttl, timeout: 10 * time.Second, logger: logger,
		records: prometheus.NewDesc("doclog_consumer_lag_records",
			"Records between a consumer group's committed offset and the partition's end.", labels, nil),
		seconds: prometheus.NewDesc("doclog_consumer_lag_seconds",
			"Age of the first record a consumer group has not committed past (0 when caught up).", labels, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "doclog_consumer_lag_errors_total",
			Help: "Failed attempts to measure consumer lag."}),
	}
	c.measure = func(ctx context.Context) ([]kafka.PartitionLag, error) {
		return kafka.ConsumerLag(ctx, c.cfg, c.groups...)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.records
	ch <- c.seconds
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector. A failed measurement keeps the
// last good one (and counts the failure), so a blip does not blank the
// dashboards.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) >= c.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		lags, err := c.measure(ctx)
		cancel()
		if err != nil {
			c.errors.Inc()
			c.logger.Warn("measuring consumer lag failed", zap.Error(err))
		} else {
			c.lags = lags
		}
		c.at = time.Now()
	}
	lags := c.lags
	c.mu.Unlock()
	for _, l := range lags {
		p := strconv.Itoa(int(l.Partition))
		ch <- prometheus.MustNewConstMetric(c.records, prometheus.GaugeValue, float64(l.Lag), l.Group, l.Topic, p)
		ch <- prometheus.MustNewConstMetric(c.seconds, prometheus.GaugeValue, l.LagSeconds, l.Group, l.Topic, p)
	}
	c.errors.Collect(ch)
}
