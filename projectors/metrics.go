package projectors

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/doclog/doclog/internal/telemetry"
)

// metrics are the runner's Prometheus series, labelled by projector so that
// several runners share one registry.
type metrics struct {
	batches      prometheus.Counter
	batchRecords prometheus.Observer
	stage        *prometheus.HistogramVec
	applied      prometheus.Counter
	healed       *prometheus.CounterVec
	redelivered  prometheus.Counter
	quarantines  prometheus.Counter
	quarantined  prometheus.Gauge
	errors       *prometheus.CounterVec
	fenced       prometheus.Counter
	headCache    *prometheus.CounterVec
	lag          *prometheus.GaugeVec
	// jobLatency is how long a job took from its submission (or from its
	// write-ready commit) until this projector committed its effects: for
	// docview, the job's submit→READ_READY latency.
	jobLatency *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, projector string) *metrics {
	const ns, sub = "doclog", "projector"
	label := []string{"projector"}
	counter := func(name, help string) prometheus.Counter {
		return telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, label)).WithLabelValues(projector)
	}
	return &metrics{
		batches: counter("batches_total", "Batch transactions committed."),
		batchRecords: telemetry.Reuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "batch_records", Help: "Write-ready records per batch.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}, label)).WithLabelValues(projector),
		stage: telemetry.Reuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "stage_seconds", Help: "Duration of a batch stage (decode, transaction, commit, reconcile).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"projector", "stage"})),
		applied: counter("operations_applied_total", "Operations verified and applied."),
		healed: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "operations_healed_total", Help: "Operations read from the log instead of a record (gap, omitted, reconciler).",
		}, []string{"projector", "source"})),
		redelivered: counter("operations_redelivered_total", "Operations skipped because they were already applied."),
		quarantines: counter("quarantines_total", "Streams quarantined: an operation could not be applied or its hash disagreed."),
		quarantined: telemetry.Reuse(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "quarantined_streams", Help: "Streams currently quarantined (alert when above 0).",
		}, label)).WithLabelValues(projector),
		errors: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "errors_total", Help: "Errors by kind (batch, decode, fetch, commit, reconcile, assign).",
		}, []string{"projector", "kind"})),
		fenced: counter("fenced_batches_total", "Batches refused because the partition moved to another member."),
		headCache: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "head_cache_total",
			Help: "Stored stream states a batch replayed on, by where they came from: hit (held in memory since the runner wrote them) or miss (read back and decoded).",
		}, []string{"projector", "result"})),
		lag: telemetry.Reuse(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "lag_records", Help: "Records behind the high watermark per partition, as of the last fetch.",
		}, []string{"projector", "partition"})),
		jobLatency: telemetry.Reuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "job_latency_seconds",
			Help:    "Seconds from a job's submission (from=submit) or write-ready commit (from=write) until the projector committed it; docview's from=submit is submit→READ_READY.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"projector", "from"})),
	}
}
