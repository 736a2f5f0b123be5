package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/internal/testenv"
)

// TestBrokerAllowsFastRebalances checks the test broker's settings that the
// rebalance tests of the executor and projectors rely on: a one-second
// session timeout is accepted, a group forms without the initial rebalance
// delay, and a second member joining takes partitions over quickly.
func TestBrokerAllowsFastRebalances(t *testing.T) {
	t.Parallel()
	env := testenv.Kafka(t)
	topics := env.CreateTopics()
	group := env.Group("fast")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	type member struct {
		mu       sync.Mutex
		assigned int
	}
	join := func(m *member) *kgo.Client {
		return env.Client(
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics.Jobs),
			kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
			kgo.RebalanceTimeout(3*time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				m.mu.Lock()
				m.assigned += len(a[topics.Jobs])
				m.mu.Unlock()
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				m.mu.Lock()
				m.assigned -= len(r[topics.Jobs])
				m.mu.Unlock()
			}),
		)
	}
	owned := func(m *member) int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.assigned
	}
	pollUntil := func(cond func() bool, cls ...*kgo.Client) time.Duration {
		start := time.Now()
		for !cond() {
			for _, cl := range cls {
				pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
				cl.PollFetches(pctx)
				pcancel()
			}
			require.NoError(t, ctx.Err())
		}
		return time.Since(start)
	}

	var a, b member
	clA := join(&a)
	took := pollUntil(func() bool { return owned(&a) == 4 }, clA)
	t.Logf("first member owns all 4 partitions after %s", took)

	clB := join(&b)
	took = pollUntil(func() bool { return owned(&b) > 0 && owned(&a)+owned(&b) == 4 }, clA, clB)
	t.Logf("second member shares the partitions after %s", took)
	require.Less(t, took, 10*time.Second)
	require.Equal(t, 2, owned(&a))
	require.Equal(t, 2, owned(&b))
}
