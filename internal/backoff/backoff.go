// Package backoff owns the retry delays doclog's loops share: exponential
// from a base and capped (Capped), then jittered so that members retrying
// after one outage do not retry in step, over the upper half (Exponential,
// the executor's jobs and the Kafka clients) or either way (Spread, the
// start-up wait for a dependency, internal/depwait).
package backoff

import (
	"math/rand/v2"
	"time"
)

// Exponential is the delay before retry n (1-based): base doubled n-1 times,
// capped at maxDelay, then drawn from its upper half.
func Exponential(base, maxDelay time.Duration, n int) time.Duration {
	d := Capped(base, maxDelay, 2, n)
	return d/2 + rand.N(d/2+1)
}

// Capped is the delay before retry n (1-based) before any jitter: base
// multiplied by factor n-1 times, capped at maxDelay. The growth stops at
// the cap, so a long outage's count cannot overflow it.
func Capped(base, maxDelay time.Duration, factor float64, n int) time.Duration {
	d := float64(base)
	for i := 1; i < n && d < float64(maxDelay); i++ {
		d *= factor
	}
	return min(time.Duration(d), maxDelay)
}

// Spread draws a delay uniformly within ±fraction of d; a fraction of 0 or
// less leaves d as it is. Unlike Exponential's, the spread may pass a cap
// d was held to, for callers whose wait is counted from d either way.
func Spread(d time.Duration, fraction float64) time.Duration {
	if fraction <= 0 {
		return d
	}
	return time.Duration(float64(d) * (1 + fraction*(2*rand.Float64()-1)))
}
