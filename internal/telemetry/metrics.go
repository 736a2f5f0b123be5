package telemetry

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every doclog series: doclog_<subsystem>_<name>.
const Namespace = "doclog"

// NewRegistry returns a registry holding the Go runtime and process
// collectors. Each process builds its own rather than using the global
// default registry, so tests can run several roles in one binary without
// "duplicate metrics collector registration" panics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// ForRole returns a Registerer that attaches the constant label role to
// every series registered through it. `doclog dev` runs every role in one
// process and needs it to tell their series apart; with the chart each pod
// runs one role and Prometheus' pod labels already do.
func ForRole(r prometheus.Registerer, role string) prometheus.Registerer {
	return prometheus.WrapRegistererWith(prometheus.Labels{"role": role}, r)
}

// Register registers every collector, failing with the first that cannot be
// (a name clash is a programming error the caller should report).
func Register(r prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("registering a metrics collector: %w", err)
		}
	}
	return nil
}

// Reuse registers c and returns it or, when a collector of the same
// description is registered already (two members or runners in one process
// share a registry), returns that one so both count into the same series.
// Any other failure is a programming error (a clash of names or labels) and
// panics, as prometheus.MustRegister does: silently unregistered series are
// worse than a crash the tests catch.
func Reuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("registering a metrics collector: %v", err))
}
