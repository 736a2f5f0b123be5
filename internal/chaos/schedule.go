package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Fault kinds.
const (
	FaultKill          = "kill"           // kill -9 of an executor or projector, restarted after Delay
	FaultKillIngest    = "kill-ingest"    // kill -9 of ingest, restarted after Delay
	FaultCrashPostgres = "crash-postgres" // pg_ctl restart -m immediate
	FaultKillBroker    = "kill-broker"    // kill -9 of the broker, restarted after Delay on its storage
	FaultJoin          = "join"           // a third executor joins the group
	FaultLeave         = "leave"          // and leaves it again
	FaultCutPostgres   = "cut-postgres"   // executor-2's Postgres traffic stalls for Delay
	FaultCutBroker     = "cut-broker"     // projectors-2's broker traffic stalls for Delay
)

// Fault is one scheduled fault.
type Fault struct {
	At     time.Duration // from the start of the load
	Kind   string
	Target string        // member name, for kills
	Delay  time.Duration // down time before the restart, or the cut's length
}

func (f Fault) String() string {
	s := fmt.Sprintf("+%5.1fs %-14s", f.At.Seconds(), f.Kind)
	if f.Target != "" {
		s += " " + f.Target
	}
	if f.Delay > 0 {
		s += fmt.Sprintf(" (%.1fs)", f.Delay.Seconds())
	}
	return s
}

// Profile says how many faults of each kind a run injects and over how long.
type Profile struct {
	Kills          int // executors and projectors
	IngestKills    int
	BrokerKills    int
	PostgresCrash  int
	Rebalance      bool // a third executor joins, later leaves
	Cuts           bool // one cut executor↔Postgres, one projector↔broker
	CutLength      time.Duration
	Warmup         time.Duration // load before the first fault
	Spread         time.Duration // the faults' span after the warmup
	MaxRestartWait time.Duration // a killed process is down for up to this long
}

// Full is the profile of `make chaos`.
var Full = Profile{
	Kills: 22, IngestKills: 1, BrokerKills: 1, PostgresCrash: 1, Rebalance: true, Cuts: true,
	CutLength: 10 * time.Second, Warmup: 10 * time.Second, Spread: 150 * time.Second, MaxRestartWait: 3 * time.Second,
}

// Short is the profile of the package's test, run by `go test ./...`.
var Short = Profile{
	Kills: 5, IngestKills: 1, BrokerKills: 1, PostgresCrash: 1,
	Warmup: 5 * time.Second, Spread: 45 * time.Second, MaxRestartWait: 2 * time.Second,
}

// killable are the members the kills choose from.
var killable = []string{"executor-1", "executor-2", "projectors-1", "projectors-2"}

// Schedule derives the faults of a run from its seed: the same seed, the same
// faults at the same offsets.
func (p Profile) Schedule(seed uint64) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x0c4a05))
	down := func() time.Duration {
		return 500*time.Millisecond + time.Duration(rng.Int64N(int64(p.MaxRestartWait-500*time.Millisecond)+1))
	}
	var faults []Fault
	for i := range p.Kills {
		// Every member is hit at least once; the rest fall where they may.
		target := killable[i%len(killable)]
		if i >= len(killable) {
			target = killable[rng.IntN(len(killable))]
		}
		faults = append(faults, Fault{Kind: FaultKill, Target: target, Delay: down()})
	}
	for range p.IngestKills {
		faults = append(faults, Fault{Kind: FaultKillIngest, Target: "ingest-1", Delay: down()})
	}
	for range p.BrokerKills {
		faults = append(faults, Fault{Kind: FaultKillBroker, Delay: down()})
	}
	for range p.PostgresCrash {
		faults = append(faults, Fault{Kind: FaultCrashPostgres})
	}
	if p.Rebalance {
		faults = append(faults, Fault{Kind: FaultJoin, Target: "executor-3"}, Fault{Kind: FaultLeave, Target: "executor-3"})
	}
	if p.Cuts {
		faults = append(faults, Fault{Kind: FaultCutPostgres, Target: "executor-2", Delay: p.CutLength},
			Fault{Kind: FaultCutBroker, Target: "projectors-2", Delay: p.CutLength})
	}
	rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	// The third executor joins before it leaves.
	join, leave := -1, -1
	for i, f := range faults {
		switch f.Kind {
		case FaultJoin:
			join = i
		case FaultLeave:
			leave = i
		}
	}
	if join > leave {
		faults[join], faults[leave] = faults[leave], faults[join]
	}
	slot := p.Spread / time.Duration(len(faults))
	for i := range faults {
		faults[i].At = p.Warmup + time.Duration(i)*slot + time.Duration(rng.Int64N(int64(slot)/3+1))
	}
	return faults
}
