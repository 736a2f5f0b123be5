package readstore

import (
	"github.com/doclog/doclog/internal/telemetry"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	waits       *prometheus.CounterVec
	waitSeconds *prometheus.HistogramVec
	waiting     prometheus.Gauge
	lookups     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "doclog", "readstore"
	return &metrics{
		requests: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "requests_total", Help: "Requests by route pattern and HTTP status.",
		}, []string{"route", "code"})),
		duration: telemetry.Reuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "request_seconds", Help: "Request duration by route pattern, token waits included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"})),
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
	}
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// observe records a served request under the pattern the mux matched.
func (m *metrics) observe(r *http.Request, status int, start time.Time) {
	route := r.Pattern
	if route == "" {
		route = "unmatched"
	}
	if status == 0 {
		status = http.StatusOK
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
}
