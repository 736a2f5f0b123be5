package analytics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the projector's ClickHouse series, labelled by projector and
// table. The runner's own series (batches, stages, lag, quarantines) cover
// the rest.
type metrics struct {
	rows    *prometheus.HistogramVec
	seconds *prometheus.HistogramVec
	errors  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "doclog", "analytics"
	labels := []string{"projector", "table"}
	return &metrics{
		rows: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "insert_rows", Help: "Rows per ClickHouse insert (one insert per table per runner batch).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}, labels)),
		seconds: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "insert_seconds", Help: "Duration of a ClickHouse insert, from prepare to acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, labels)),
		errors: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "insert_errors_total", Help: "ClickHouse inserts that failed (the runner retries the batch).",
		}, labels)),
	}
}

// register returns c, or the collector already registered under its
// descriptor, so several projectors (or one rebuilt in a test) share series.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
