package executor

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doclog/doclog/internal/telemetry"
	"github.com/doclog/doclog/record"
)

// metrics are the executor's Prometheus series: one histogram of stage
// durations (decode, lookup, load, reduce, append, produce, commit) so the
// stages of a batch read side by side, batch sizes, the outcomes of appends
// and jobs, and the submit→WRITE_READY latency.
type metrics struct {
	stage       *prometheus.HistogramVec
	batchJobs   prometheus.Histogram
	batchOps    prometheus.Histogram
	conflicts   prometheus.Counter
	retries     prometheus.Counter
	deadLetters *prometheus.CounterVec
	jobs        *prometheus.CounterVec
	latency     prometheus.Histogram
	outage      prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "doclog", "executor"
	m := &metrics{
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "stage_seconds",
			Help:    "Duration of a batch stage: decode, lookup, load, reduce, append, produce, commit.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12)}, []string{"stage"}),
		batchJobs: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "batch_jobs",
			Help: "Jobs per batch.", Buckets: prometheus.ExponentialBuckets(1, 3, 9)}),
		batchOps: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "batch_operations",
			Help: "Operations per batch append.", Buckets: prometheus.ExponentialBuckets(1, 3, 10)}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "append_conflicts_total",
			Help: "Append requests refused by a concurrent writer (revision or read-set conflict); retried without counting against maxRetries."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retries_total",
			Help: "Job attempts retried after a transient error (counted against maxRetries)."}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "dead_letters_total",
			Help: "Dead letters produced, by errorType."}, []string{"error_type"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "jobs_total",
			Help: "Jobs settled, by status (WRITE_READY, FAILED) and whether it was announced again (reannounced=true)."}, []string{"status", "reannounced"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "job_write_ready_seconds",
			Help:    "Seconds from a job's submission to its WRITE_READY commit (jobs that carry a submit time).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14)}),
		outage: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "unavailable",
			Help: "1 while Postgres or Kafka is unavailable and fetching is paused."}),
	}
	m.stage = telemetry.Reuse(reg, m.stage)
	m.batchJobs = telemetry.Reuse(reg, m.batchJobs)
	m.batchOps = telemetry.Reuse(reg, m.batchOps)
	m.conflicts = telemetry.Reuse(reg, m.conflicts)
	m.retries = telemetry.Reuse(reg, m.retries)
	m.deadLetters = telemetry.Reuse(reg, m.deadLetters)
	m.jobs = telemetry.Reuse(reg, m.jobs)
	m.latency = telemetry.Reuse(reg, m.latency)
	m.outage = telemetry.Reuse(reg, m.outage)
	// Known label values start at 0, so a dashboard's rate() sees the first
	// dead letter of a kind rather than a series appearing from nowhere.
	for _, t := range record.ErrorTypes() {
		m.deadLetters.WithLabelValues(string(t))
	}
	return m, nil
}

// since observes the time since start under stage.
func (m *metrics) since(stage string, start time.Time) {
	m.stage.WithLabelValues(stage).Observe(time.Since(start).Seconds())
}
