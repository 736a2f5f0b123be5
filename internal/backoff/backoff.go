// Package backoff owns the one retry delay doclog's loops share: exponential
// from a base, capped, and jittered over its upper half, so that members
// retrying after one outage do not retry in step.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Exponential is the delay before retry n (1-based): base doubled n-1 times,
// capped at maxDelay, then drawn from its upper half.
func Exponential(base, maxDelay time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	return d/2 + rand.N(d/2+1)
}
