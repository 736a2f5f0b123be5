package kafka

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The clients' retry backoff grows from 100ms but never past a second, so a
// broker back from an outage sees every member again within one.
func TestRetryBackoffIsCappedAtASecond(t *testing.T) {
	for fails := 1; fails <= 30; fails++ {
		for range 50 {
			d := retryBackoff(fails)
			require.GreaterOrEqual(t, d, 50*time.Millisecond, "after %d failures", fails)
			require.LessOrEqual(t, d, maxRetryBackoff, "after %d failures", fails)
		}
	}
	require.LessOrEqual(t, retryBackoff(1), 100*time.Millisecond)
	require.GreaterOrEqual(t, retryBackoff(10), maxRetryBackoff/2)
}
