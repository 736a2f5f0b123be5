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
