package chaos

import (
	"context"
	"fmt"
	"time"
)

// Injector carries out faults on the run's fleet, services and proxies.
type Injector struct {
	Members  map[string]*Member
	Services *Services
	PGProxy  *Proxy // executor-2 ↔ Postgres
	BrokerPx *Proxy // projector-2 ↔ broker
}

// Injected is a fault as it happened.
type Injected struct {
	Fault
	Start, End time.Time // End: restarted, healed or recovered
	Err        error
}

// Apply injects one fault and undoes it (restart, heal) before returning.
func (in *Injector) Apply(ctx context.Context, f Fault) error {
	switch f.Kind {
	case FaultKill, FaultKillIngest:
		m, err := in.member(f.Target)
		if err != nil {
			return err
		}
		m.Kill()
		if err := sleep(ctx, f.Delay); err != nil {
			return err
		}
		return m.Start()
	case FaultKillBroker:
		if err := in.Services.KillBroker(); err != nil {
			return err
		}
		if err := sleep(ctx, f.Delay); err != nil {
			return err
		}
		return in.Services.RestartBroker(ctx)
	case FaultCrashPostgres:
		return in.Services.CrashPostgres(ctx)
	case FaultJoin:
		m, err := in.member(f.Target)
		if err != nil {
			return err
		}
		return m.Revive()
	case FaultLeave:
		m, err := in.member(f.Target)
		if err != nil {
			return err
		}
		m.Stop(20 * time.Second)
		return nil
	case FaultCutPostgres, FaultCutBroker:
		p := in.PGProxy
		if f.Kind == FaultCutBroker {
			p = in.BrokerPx
		}
		p.Cut()
		defer p.Heal()
		return sleep(ctx, f.Delay)
	}
	return fmt.Errorf("applying a fault: unknown kind %q", f.Kind)
}

func (in *Injector) member(name string) (*Member, error) {
	m, ok := in.Members[name]
	if !ok {
		return nil, fmt.Errorf("applying a fault: no member %q", name)
	}
	return m, nil
}

// RunSchedule applies the faults in order, each at its offset from start or
// as soon as the one before it is over, and returns what happened.
func (in *Injector) RunSchedule(ctx context.Context, start time.Time, faults []Fault, logf func(string, ...any)) []Injected {
	var done []Injected
	for _, f := range faults {
		if err := sleep(ctx, time.Until(start.Add(f.At))); err != nil {
			break
		}
		rec := Injected{Fault: f, Start: time.Now()}
		rec.Err = in.Apply(ctx, f)
		rec.End = time.Now()
		logf("fault %s: at +%.1fs, over at +%.1fs%s", f, rec.Start.Sub(start).Seconds(), rec.End.Sub(start).Seconds(), errSuffix(rec.Err))
		done = append(done, rec)
		if ctx.Err() != nil {
			break
		}
	}
	return done
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": ERROR " + err.Error()
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
