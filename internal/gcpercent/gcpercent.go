// Package gcpercent owns the garbage collector's target of a doclog
// process: how far the heap may grow past what a collection left live
// before the next one starts (the Go runtime's GOGC).
//
// Go's default, 100, suits a program whose live heap is large against its
// allocation rate. doclog's roles are the other kind: a small live heap (a
// write cache of canonical state, the records of a batch) and a high rate
// of short-lived allocations per operation (decoded records, request
// bodies, encodings), so at 100 the collector runs many times a second and
// took about a fifth of a loaded process's CPU (marking and assists). At 200 it runs half as often for
// a heap about half again as large.
package gcpercent

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// Default is doclog's target when neither the setting nor GOGC says
// otherwise.
const Default = 200

// Source says where the target in effect came from.
type Source string

const (
	// FromSetting is an explicit setting (flag, variable or config file).
	FromSetting Source = "setting"
	// FromGOGC is the runtime's own GOGC variable, which the runtime read
	// at start and which wins over doclog's default.
	FromGOGC Source = "GOGC"
	// FromDefault is Default.
	FromDefault Source = "default"
)

// Validate checks a target: 0 (Default) or at least 10, below which the
// collector would run nearly without pause.
func Validate(percent int) error {
	if percent != 0 && percent < 10 {
		return fmt.Errorf("--gc-percent must be at least 10 (or 0 for %d), got %d", Default, percent)
	}
	return nil
}

// Apply sets the collector's target for the whole process: percent (0:
// Default) when explicit (a flag, variable or config file gave it), else
// what a non-empty GOGC in the environment says, else percent. It returns
// the target in effect (-1 when GOGC turned the collector off) and where
// it came from, for the start's log line.
func Apply(percent int, explicit bool) (int, Source) {
	if os.Getenv("GOGC") != "" && !explicit {
		return current(), FromGOGC
	}
	if percent == 0 {
		percent = Default
	}
	debug.SetGCPercent(percent)
	if explicit {
		return percent, FromSetting
	}
	return percent, FromDefault
}

// current is the target in effect, as the runtime reports it.
func current() int {
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	return int(int64(sample[0].Value.Uint64())) // off reads as -1
}
