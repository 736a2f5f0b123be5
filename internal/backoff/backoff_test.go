package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/backoff"
)

// Each delay lies in the upper half of the doubled base, never past the cap.
func TestExponential(t *testing.T) {
	base, ceiling := 100*time.Millisecond, time.Second
	for n := 1; n <= 30; n++ {
		want := base << min(n-1, 10)
		want = min(want, ceiling)
		for range 50 {
			d := backoff.Exponential(base, ceiling, n)
			require.GreaterOrEqual(t, d, want/2, "retry %d", n)
			require.LessOrEqual(t, d, want, "retry %d", n)
		}
	}
}

// The delay grows by the factor from the base and stops at the cap, however
// many retries.
func TestCapped(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		factor float64
		want   []time.Duration
	}{
		{2, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{1.5, []time.Duration{100 * ms, 150 * ms, 225 * ms, 337500 * time.Microsecond}},
		{1, []time.Duration{100 * ms, 100 * ms, 100 * ms}},
	} {
		for i, w := range c.want {
			require.Equal(t, w, backoff.Capped(100*ms, time.Second, c.factor, i+1), "factor %g, retry %d", c.factor, i+1)
		}
		require.Equal(t, time.Second, backoff.Capped(100*ms, time.Second, max(c.factor, 2), 1<<20), "the cap holds")
	}
}

// Each spread delay lies within the fraction either way; none leaves the
// delay as it is.
func TestSpread(t *testing.T) {
	d := time.Second
	for range 200 {
		s := backoff.Spread(d, 0.2)
		require.GreaterOrEqual(t, s, 800*time.Millisecond)
		require.LessOrEqual(t, s, 1200*time.Millisecond)
	}
	require.Equal(t, d, backoff.Spread(d, 0))
	require.Equal(t, d, backoff.Spread(d, -1))
}
