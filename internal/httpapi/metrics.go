package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doclog/doclog/internal/telemetry"
)

// RequestMetrics counts an API's requests by route pattern and status and
// times them: doclog_<subsystem>_requests_total and
// doclog_<subsystem>_request_seconds.
type RequestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewRequestMetrics registers the series of the API named subsystem.
func NewRequestMetrics(reg prometheus.Registerer, subsystem string) *RequestMetrics {
	return &RequestMetrics{
		requests: telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: telemetry.Namespace, Subsystem: subsystem, Name: "requests_total",
			Help: "Requests by route pattern and HTTP status.",
		}, []string{"route", "code"})),
		duration: telemetry.Reuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: telemetry.Namespace, Subsystem: subsystem, Name: "request_seconds",
			Help:    "Request duration by route pattern, waits included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"})),
	}
}

// Wrap observes every request mux serves, under the pattern it matched
// (the mux sets r.Pattern), so the label set stays bounded.
func (m *RequestMetrics) Wrap(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		mux.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
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

// Flush passes flushes through, for handlers that stream.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
