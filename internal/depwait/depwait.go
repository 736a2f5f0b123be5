// Package depwait waits at start for a dependency (Postgres, Kafka,
// ClickHouse) to answer, with capped exponential backoff. A role started
// during an outage waits, unready, instead of exiting: exiting would add a
// restart to the outage and nothing else.
package depwait

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/backoff"
)

// Defaults of Config.
const (
	DefaultInitialBackoff = 250 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultMultiplier     = 2.0
	DefaultJitter         = 0.2
	DefaultProbeTimeout   = 5 * time.Second
	DefaultLogInterval    = 30 * time.Second
)

// Config is how a dependency is waited for. The zero value takes every
// default.
type Config struct {
	// InitialBackoff is the pause after the first failed attempt. Default
	// 250ms: a dependency that is merely slow to start costs little.
	InitialBackoff time.Duration
	// MaxBackoff caps the pause between attempts, and so bounds how long a
	// dependency that came back goes unnoticed. Default 5s.
	MaxBackoff time.Duration
	// Multiplier grows the pause after each further failure. Default 2.
	Multiplier float64
	// Jitter spreads each pause by up to this fraction either way, so the
	// pods one outage stopped do not retry in step. Default 0.2; negative
	// turns it off.
	Jitter float64
	// ProbeTimeout bounds one probe: an address that drops packets must not
	// hold the wait for the kernel's connect timeout. Default 5s.
	ProbeTimeout time.Duration
	// LogInterval is the least time between two "waiting" log entries of
	// one dependency; the first failure is logged at once. Default 30s.
	LogInterval time.Duration
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.InitialBackoff == 0 {
		c.InitialBackoff = DefaultInitialBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.Multiplier == 0 {
		c.Multiplier = DefaultMultiplier
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.LogInterval == 0 {
		c.LogInterval = DefaultLogInterval
	}
	return c
}

// Validate reports every setting that cannot work. Call it on the result of
// WithDefaults.
func (c Config) Validate() error {
	var errs []error
	if c.InitialBackoff <= 0 {
		errs = append(errs, fmt.Errorf("dependency wait: initial backoff must be positive, got %s", c.InitialBackoff))
	}
	if c.MaxBackoff < c.InitialBackoff {
		errs = append(errs, fmt.Errorf("dependency wait: max backoff %s is below the initial backoff %s", c.MaxBackoff, c.InitialBackoff))
	}
	if c.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("dependency wait: backoff multiplier must be at least 1, got %g", c.Multiplier))
	}
	if c.Jitter >= 1 {
		errs = append(errs, fmt.Errorf("dependency wait: jitter must be below 1, got %g", c.Jitter))
	}
	if c.ProbeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("dependency wait: probe timeout must be positive, got %s", c.ProbeTimeout))
	}
	if c.LogInterval <= 0 {
		errs = append(errs, fmt.Errorf("dependency wait: log interval must be positive, got %s", c.LogInterval))
	}
	return errors.Join(errs...)
}

// Backoff is the pause after the failures-th consecutive failure (from 1),
// before jitter: InitialBackoff × Multiplier^(failures-1), capped at
// MaxBackoff.
func (c Config) Backoff(failures int) time.Duration {
	return backoff.Capped(c.InitialBackoff, c.MaxBackoff, c.Multiplier, failures)
}

// Dependency is one service a role needs before it can start its work.
type Dependency struct {
	// Name names the dependency in logs, errors and readiness reports
	// ("postgres", "kafka", "clickhouse").
	Name string
	// Probe reports whether the dependency answers, within
	// Config.ProbeTimeout. Optional: without it Setup is the only attempt.
	Probe func(ctx context.Context) error
	// Setup runs once Probe passes: migrations, topic creation, a
	// connection the role keeps. It is not bounded by ProbeTimeout, since
	// a migration may rightly take minutes. Optional. An error wrapped by
	// Permanent ends the wait with it; any other starts the next attempt
	// after the backoff, as a failed probe does.
	Setup func(ctx context.Context) error
	// Waiting, if set, is given each failed attempt as an error naming the
	// dependency and a reason safe to show anyone (see Reason), for a
	// readiness report.
	Waiting func(err error)
}

// Wait probes dep until it answers and its setup succeeds, pausing between
// attempts as cfg says. It returns nil then; the setup's error when it is
// permanent; and an error wrapping the context's cause when ctx ends first,
// which it notices at once, even mid-pause. logger may be nil.
func Wait(ctx context.Context, cfg Config, dep Dependency, logger *zap.Logger) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	log := logger.With(zap.String("dependency", dep.Name))
	start := time.Now()
	var logged time.Time
	for failures := 0; ; {
		err := attempt(ctx, cfg, dep)
		if err == nil {
			if failures > 0 {
				log.Info("dependency answers", zap.Int("attempts", failures+1), zap.Duration("waited", time.Since(start)))
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for %s: %w", dep.Name, context.Cause(ctx))
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			return fmt.Errorf("%s: %w", dep.Name, perm.err)
		}
		failures++
		reason := Reason(err)
		if dep.Waiting != nil {
			dep.Waiting(fmt.Errorf("waiting for %s: %s", dep.Name, reason))
		}
		pause := backoff.Spread(cfg.Backoff(failures), cfg.Jitter)
		if logged.IsZero() || time.Since(logged) >= cfg.LogInterval {
			logged = time.Now()
			log.Warn("waiting for dependency", zap.String("reason", reason), zap.Int("attempts", failures),
				zap.Duration("waited", time.Since(start)), zap.Duration("next_attempt_in", pause), zap.Error(err))
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for %s: %w", dep.Name, context.Cause(ctx))
		case <-t.C:
		}
	}
}

func attempt(ctx context.Context, cfg Config, dep Dependency) error {
	if dep.Probe != nil {
		pctx, cancel := context.WithTimeout(ctx, cfg.ProbeTimeout)
		err := dep.Probe(pctx)
		cancel()
		if err != nil {
			return err
		}
	}
	if dep.Setup != nil {
		return dep.Setup(ctx)
	}
	return nil
}

// Permanent marks a setup error that waiting cannot cure (a topic with the
// wrong partition count, a migration the server refuses), so Wait returns
// it instead of trying again. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }
