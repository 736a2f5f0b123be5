package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/telemetry"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, []byte) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

func newServer(t *testing.T, h *telemetry.Health, g prometheus.Gatherer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(telemetry.NewMux(h, g))
	t.Cleanup(srv.Close)
	return srv
}

func newHealth(t *testing.T, cfg telemetry.HealthConfig) *telemetry.Health {
	t.Helper()
	h, err := telemetry.NewHealth(cfg)
	require.NoError(t, err)
	return h
}

func TestReadyzFlipsWithCheck(t *testing.T) {
	t.Parallel()
	h := newHealth(t, telemetry.HealthConfig{})
	srv := newServer(t, h, telemetry.NewRegistry())

	code, body := get(t, srv, "/readyz")
	require.Equal(t, http.StatusOK, code, "no checks means ready")
	require.JSONEq(t, `{"status":"ready","checks":[]}`, string(body))

	var pgDown error
	h.AddCheck("postgres", func(context.Context) error { return pgDown })
	h.AddCheck("kafka", func(context.Context) error { return nil })
	code, _ = get(t, srv, "/readyz")
	require.Equal(t, http.StatusOK, code)

	pgDown = errors.New("dial tcp: connection refused")
	code, body = get(t, srv, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	var rep telemetry.Report
	require.NoError(t, json.Unmarshal(body, &rep))
	require.Equal(t, "not ready", rep.Status)
	require.Equal(t, []string{"postgres"}, rep.Failing)
	require.Equal(t, []telemetry.CheckResult{
		{Name: "kafka", OK: true},
		{Name: "postgres", Error: "dial tcp: connection refused"},
	}, rep.Checks)

	// /healthz does not depend on checks: a down dependency must not get
	// the pod restarted.
	code, body = get(t, srv, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", string(body))

	pgDown = nil
	code, _ = get(t, srv, "/readyz")
	require.Equal(t, http.StatusOK, code)
}

func TestReadyzGateTimeoutPanicAndDrain(t *testing.T) {
	t.Parallel()
	h := newHealth(t, telemetry.HealthConfig{CheckTimeout: 50 * time.Millisecond})
	srv := newServer(t, h, telemetry.NewRegistry())

	gate := h.AddGate("executor")
	code, _ := get(t, srv, "/readyz")
	require.Equal(t, http.StatusOK, code, "a new gate passes")

	gate.Fail(errors.New("postgres unavailable, fetching paused"))
	rep := h.Ready(context.Background())
	require.Equal(t, []string{"executor"}, rep.Failing)
	require.Equal(t, "postgres unavailable, fetching paused", rep.Checks[0].Error)
	gate.Pass()
	require.Equal(t, "ready", h.Ready(context.Background()).Status)

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h.AddCheck("clickhouse", func(context.Context) error { <-release; return nil }) // ignores its context
	h.AddCheck("broken", func(context.Context) error { panic("boom") })
	start := time.Now()
	code, body := get(t, srv, "/readyz")
	require.Less(t, time.Since(start), 2*time.Second, "a hung check is bounded by the timeout")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.NoError(t, json.Unmarshal(body, &rep))
	require.Equal(t, []string{"broken", "clickhouse"}, rep.Failing)
	require.Contains(t, rep.Checks[0].Error, "check panicked: boom")
	require.Contains(t, rep.Checks[1].Error, "did not answer within 50ms")

	h2 := newHealth(t, telemetry.HealthConfig{})
	h2.Drain()
	rep = h2.Ready(context.Background())
	require.Equal(t, "not ready", rep.Status)
	require.Equal(t, []string{"shutdown"}, rep.Failing)
}

func TestHealthConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := telemetry.NewHealth(telemetry.HealthConfig{CheckTimeout: -time.Second})
	require.ErrorContains(t, err, "readiness check timeout must be positive")
	require.Equal(t, telemetry.DefaultCheckTimeout, telemetry.HealthConfig{}.WithDefaults().CheckTimeout)
}

func scrape(t *testing.T, srv *httptest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, srv, "/metrics")
	require.Equal(t, http.StatusOK, code)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	return families
}

func TestMetricsExposesRegisteredSeries(t *testing.T) {
	t.Parallel()
	reg := telemetry.NewRegistry()
	batches := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: telemetry.Namespace, Subsystem: "executor", Name: "batch_size",
		Help: "Jobs per batch.", Buckets: []float64{1, 10, 100},
	})
	conflicts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: telemetry.Namespace, Subsystem: "executor", Name: "append_conflicts_total",
		Help: "Append conflicts.",
	}, []string{"kind"})
	require.NoError(t, telemetry.Register(telemetry.ForRole(reg, "executor"), batches, conflicts))
	require.ErrorContains(t, telemetry.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "go_goroutines", Help: "clash"})),
		"registering a metrics collector")
	batches.Observe(7)
	conflicts.WithLabelValues("revision").Add(3)

	srv := newServer(t, newHealth(t, telemetry.HealthConfig{}), reg)
	families := scrape(t, srv)
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "doclog_executor_batch_size", "doclog_executor_append_conflicts_total"} {
		require.Contains(t, families, name)
	}
	h := families["doclog_executor_batch_size"]
	require.Equal(t, dto.MetricType_HISTOGRAM, h.GetType())
	require.Equal(t, uint64(1), h.Metric[0].GetHistogram().GetSampleCount())
	require.Equal(t, 7.0, h.Metric[0].GetHistogram().GetSampleSum())
	require.Equal(t, "role", h.Metric[0].Label[0].GetName())
	require.Equal(t, "executor", h.Metric[0].Label[0].GetValue())

	c := families["doclog_executor_append_conflicts_total"].Metric[0]
	require.Equal(t, 3.0, c.GetCounter().GetValue())
	labels := map[string]string{}
	for _, l := range c.Label {
		labels[l.GetName()] = l.GetValue()
	}
	require.Equal(t, map[string]string{"kind": "revision", "role": "executor"}, labels)
}

type failingCollector struct{ desc *prometheus.Desc }

func (f failingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f failingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.desc, errors.New("database unreachable"))
}

func TestMetricsContinuesPastAFailingCollector(t *testing.T) {
	t.Parallel()
	reg := telemetry.NewRegistry()
	reg.MustRegister(failingCollector{prometheus.NewDesc("doclog_broken", "broken", nil, nil)})
	families := scrape(t, newServer(t, newHealth(t, telemetry.HealthConfig{}), reg))
	require.Contains(t, families, "go_goroutines")
	require.NotContains(t, families, "doclog_broken")
}

func TestLoggerJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger, err := telemetry.NewLogger(telemetry.LogConfig{Level: "warn", Output: &buf})
	require.NoError(t, err)
	logger.Info("dropped below the level")
	logger.Warn("append conflict", zap.String("job_id", "j1"), zap.String("document_id", "d1"))
	require.NoError(t, logger.Sync())

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 1)
	var entry map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &entry))
	require.Equal(t, "warn", entry["level"])
	require.Equal(t, "append conflict", entry["msg"])
	require.Equal(t, "j1", entry["job_id"])
	require.Equal(t, "d1", entry["document_id"])
	require.Contains(t, entry, "ts")
	require.Contains(t, entry["caller"], "telemetry_test.go")
	require.NotContains(t, entry, "stacktrace", "production warnings carry no stack")
}

func TestLoggerDevelopment(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger, err := telemetry.NewLogger(telemetry.LogConfig{Level: "debug", Development: true, Output: &buf})
	require.NoError(t, err)
	logger.Debug("visible at debug")
	logger.Warn("with a stack")
	require.Panics(t, func() { logger.DPanic("development panics on DPanic") })

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3)
	var warn map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &warn))
	require.Equal(t, "warn", warn["level"])
	require.Contains(t, warn, "stacktrace")

	buf.Reset()
	console, err := telemetry.NewLogger(telemetry.LogConfig{Encoding: telemetry.EncodingConsole, Output: &buf})
	require.NoError(t, err)
	console.Info("hello", zap.Int("n", 1))
	require.Regexp(t, `\tinfo\t.*\thello\t\{"n": 1\}`, buf.String())
}

func TestLogConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := telemetry.NewLogger(telemetry.LogConfig{Level: "loud"})
	require.ErrorContains(t, err, `log level "loud" is not one of debug, info, warn, error`)
	_, err = telemetry.NewLogger(telemetry.LogConfig{Encoding: "xml"})
	require.ErrorContains(t, err, `log encoding "xml" is not one of json, console`)
	d := telemetry.LogConfig{}.WithDefaults()
	require.Equal(t, "info", d.Level)
	require.Equal(t, "json", d.Encoding)
	require.NotNil(t, d.Output)
}
