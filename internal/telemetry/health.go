package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultCheckTimeout bounds one readiness check when HealthConfig leaves it
// unset.
const DefaultCheckTimeout = 2 * time.Second

// Paths served by NewMux.
const (
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathMetrics = "/metrics"
)

// CheckFunc reports whether one dependency answers. It must return promptly
// once ctx is done; a nil error means ready.
type CheckFunc func(ctx context.Context) error

// HealthConfig configures a Health.
type HealthConfig struct {
	// CheckTimeout bounds each readiness check; a check still running then
	// counts as failing. It must stay below the kubelet's probe timeout
	// (the chart sets 5s) so /readyz answers 503 rather than timing out.
	// Default 2s.
	CheckTimeout time.Duration
}

// WithDefaults returns a copy with every unset field at its default.
func (c HealthConfig) WithDefaults() HealthConfig {
	if c.CheckTimeout == 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	return c
}

// Validate reports the first setting that cannot work.
func (c HealthConfig) Validate() error {
	if c.CheckTimeout <= 0 {
		return fmt.Errorf("readiness check timeout must be positive, got %s", c.CheckTimeout)
	}
	return nil
}

// Health holds a process's readiness checks. Liveness needs none: a process
// that can answer /healthz is alive, and restarting it because a dependency
// is down would only add a restart to the outage.
type Health struct {
	cfg      HealthConfig
	mu       sync.Mutex
	checks   map[string]CheckFunc
	draining atomic.Bool
}

// NewHealth returns a Health with no checks, which is ready.
func NewHealth(cfg HealthConfig) (*Health, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuring health checks: %w", err)
	}
	return &Health{cfg: cfg, checks: map[string]CheckFunc{}}, nil
}

// AddCheck registers a readiness check under the dependency's name
// ("postgres", "kafka", "clickhouse"); the name is what /readyz reports when
// it fails. Registering a name again replaces its check.
func (h *Health) AddCheck(name string, check CheckFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[name] = check
}

// AddGate registers a Gate under name and returns it: a check whose outcome
// the component sets itself, for states no query can observe (an executor
// that paused fetching because its database is unavailable).
func (h *Health) AddGate(name string) *Gate {
	g := &Gate{}
	h.AddCheck(name, g.Check)
	return g
}

// Drain makes every later readiness report fail with "shutting down", so
// load balancers stop sending work while in-flight requests finish. It
// cannot be undone: a draining process is on its way out.
func (h *Health) Drain() { h.draining.Store(true) }

// CheckResult is one dependency's outcome in a Report.
type CheckResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Report is what /readyz answers, as JSON.
type Report struct {
	// Status is "ready" or "not ready".
	Status string `json:"status"`
	// Failing names the dependencies that did not answer, sorted.
	Failing []string `json:"failing,omitempty"`
	// Checks holds every check's outcome, sorted by name.
	Checks []CheckResult `json:"checks"`
}

// Ready reports whether the process is ready. The checks run concurrently,
// each bounded by the configured timeout, so one hung dependency does not
// hide the others' outcomes.
func (h *Health) Ready(ctx context.Context) Report {
	h.mu.Lock()
	names := make([]string, 0, len(h.checks))
	fns := make([]CheckFunc, 0, len(h.checks))
	for name := range h.checks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fns = append(fns, h.checks[name])
	}
	h.mu.Unlock()

	results := make([]CheckResult, len(names))
	var wg sync.WaitGroup
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = h.run(ctx, names[i], fns[i])
		}()
	}
	wg.Wait()

	rep := Report{Status: "ready", Checks: results}
	if h.draining.Load() {
		rep.Failing = append(rep.Failing, "shutdown")
		rep.Checks = append(rep.Checks, CheckResult{Name: "shutdown", Error: "shutting down"})
	}
	for _, r := range results {
		if !r.OK {
			rep.Failing = append(rep.Failing, r.Name)
		}
	}
	sort.Strings(rep.Failing)
	if len(rep.Failing) > 0 {
		rep.Status = "not ready"
	}
	return rep
}

func (h *Health) run(ctx context.Context, name string, fn CheckFunc) (res CheckResult) {
	res.Name = name
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CheckTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("check panicked: %v", p)
			}
		}()
		done <- fn(ctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// The check ignores its context; report it rather than wait. Its
		// goroutine ends when the check returns, into the buffered channel.
		err = fmt.Errorf("check did not answer within %s: %w", h.cfg.CheckTimeout, ctx.Err())
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.OK = true
	return res
}

// Gate is a readiness check set by the component it describes. The zero
// value passes.
type Gate struct {
	err atomic.Pointer[error]
}

// Fail makes the gate's check fail with err (a nil err is treated as
// "not ready").
func (g *Gate) Fail(err error) {
	if err == nil {
		err = errors.New("not ready")
	}
	g.err.Store(&err)
}

// Pass makes the gate's check pass.
func (g *Gate) Pass() { g.err.Store(nil) }

// Check is the gate's CheckFunc.
func (g *Gate) Check(context.Context) error {
	if p := g.err.Load(); p != nil {
		return *p
	}
	return nil
}

// NewMux returns the operator endpoints of a role:
//   - /healthz answers 200 while the process can serve HTTP at all, with no
//     dependency checks (liveness);
//   - /readyz answers 200 when every check of h passes and 503 otherwise,
//     with the Report as JSON naming the failing dependencies (readiness);
//   - /metrics serves gatherer in the Prometheus text format.
//
// Roles mount their API on a separate mux or port; the chart probes this one.
func NewMux(h *Health, gatherer prometheus.Gatherer) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET "+PathReadyz, func(w http.ResponseWriter, r *http.Request) {
		rep := h.Ready(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if rep.Status != "ready" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(rep)
	})
	mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		// One failing collector must not blank the whole scrape: the
		// series that did gather are what an operator needs during an
		// incident.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	return mux
}
