package readstore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/doclog/doclog/internal/telemetry"
)

// Outcomes of a consistency-token wait (the outcome label).
const (
	outcomeAtOnce      = "reached_at_once" // reached on the request's own first check
	outcomeReached     = "reached"         // reached while waiting on the shared poller
	outcomeTimeout     = "timeout"
	outcomeQuarantined = "quarantined"
	outcomeClosed      = "closed"
	outcomeError       = "error"
)

// metrics are the read store's Prometheus series.
type metrics struct {
	waits       *prometheus.CounterVec
	waitSeconds *prometheus.HistogramVec
	waiting     prometheus.Gauge
	lookups     *prometheus.CounterVec
	notified    *prometheus.CounterVec

	feedStreams prometheus.Gauge
	feedRefused prometheus.Counter
	feedEvents  prometheus.Counter
	feedEnds    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "doclog", "readstore"
	return &metrics{
		waits: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "token_waits_total",
			Help: "Reads carrying a consistency token by source and outcome (reached_at_once, reached, timeout, quarantined, closed, error).",
		}, []string{"source", "outcome"})),
		waitSeconds: telemetry.Reuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "token_wait_seconds", Help: "How long reads waited for their source to reach their token.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"source"})),
		waiting: telemetry.Reuse(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "waiting_reads", Help: "Reads waiting on the shared poller now.",
		})),
		lookups: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "poller_lookups_total", Help: "Progress lookups of the shared poller, by source.",
		}, []string{"source"})),
		notified: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "progress_notifications_total",
			Help: "Notifications that a projector committed, by projector; each runs the shared poller's next lookup for its source at once.",
		}, []string{"source"})),
		feedStreams: telemetry.Reuse(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "feed_streams", Help: "Change-feed streams open now.",
		})),
		feedRefused: telemetry.Reuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "feed_refused_total", Help: "Change-feed streams refused with 503 because the process served its maximum.",
		})),
		feedEvents: telemetry.Reuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "feed_events_total", Help: "Change-feed events sent.",
		})),
		feedEnds: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "feed_ends_total",
			Help: "Change-feed streams ended, by reason (client_gone, write_failed: a slow or gone consumer, error: the log failed, shutdown, max_age).",
		}, []string{"reason"})),
	}
}
