package analytics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/doclog/doclog/internal/telemetry"
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
		rows: telemetry.Reuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "insert_rows", Help: "Rows per ClickHouse insert (one insert per table per runner batch).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}, labels)),
		seconds: telemetry.Reuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "insert_seconds", Help: "Duration of a ClickHouse insert, from prepare to acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, labels)),
		errors: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "insert_errors_total", Help: "ClickHouse inserts that failed (the runner retries the batch).",
		}, labels)),
	}
}
