package ingest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/kafka"
)

func TestAdmission(t *testing.T) {
	now := time.Now()
	const stale = 5 * time.Second
	for _, tc := range []struct {
		name       string
		b          kafka.Backlog
		maxRecords int64
		maxLag     time.Duration
		retryAfter time.Duration // 0: admitted
		bound      string
		message    string
	}{
		{name: "within both bounds", b: kafka.Backlog{Records: 400, Capacity: 1000, MeasuredAt: now}, maxRecords: 1000, maxLag: time.Second},
		{name: "much work, none of it old, no capacity known", b: kafka.Backlog{Records: 900, Rate: 10, MeasuredAt: now}, maxRecords: 1000, maxLag: time.Second},
		{name: "as much work as drains in the bound", b: kafka.Backlog{Records: 1000, Capacity: 1000, MeasuredAt: now}, maxRecords: 100000, maxLag: time.Second},
		{
			// 1,500 jobs at 1,000/s: a job admitted now would wait 1.5s,
			// though none has waited 500ms yet; 1,000 may wait (twice the
			// bound's worth), so 500 must drain first.
			name: "the work ahead passes the time bound before any job aged", b: kafka.Backlog{Records: 1500, Capacity: 1000, MeasuredAt: now},
			maxRecords: 100000, maxLag: 500 * time.Millisecond, retryAfter: 500 * time.Millisecond, bound: boundSeconds,
			message: "the executors are 1500 jobs behind (about 1.5s of work at the 1000 jobs/s they drain), more than the 1000 they drain in twice the bound of 500ms; nothing was produced: retry after 500ms",
		},
		{
			// The capacity is a lower bound: twice the bound's worth at it
			// may wait, for the group to show it drains more.
			name: "twice the bound's work ahead at the capacity passes", b: kafka.Backlog{Records: 900, Capacity: 1000, MeasuredAt: now},
			maxRecords: 100000, maxLag: 500 * time.Millisecond,
		},
		{
			// No capacity measured yet: jobs of 50 actions weigh 53, and
			// 8,000 of that may wait, 150 jobs. The 50 more drain in 166ms
			// at the rate that assumes (8,000 in half a second, 302 jobs/s).
			name: "before the capacity is known, the work waiting is bounded", b: kafka.Backlog{Records: 200, Weight: 53, MeasuredAt: now},
			maxRecords: 100000, maxLag: 500 * time.Millisecond, retryAfter: 166 * time.Millisecond, bound: boundSeconds,
			message: "the executors are 200 jobs behind, more than the 150 that may wait before their drain rate is known; nothing was produced: retry after 166ms",
		},
		{name: "before the capacity is known, light jobs pass", b: kafka.Backlog{Records: 1900, Weight: 4, MeasuredAt: now}, maxRecords: 100000, maxLag: 500 * time.Millisecond},
		{name: "a slow group may always hold one job", b: kafka.Backlog{Records: 1, Capacity: 0.5, MeasuredAt: now}, maxRecords: 100000, maxLag: 500 * time.Millisecond},
		{
			name: "a slow group's second job waits", b: kafka.Backlog{Records: 3, Capacity: 0.5, MeasuredAt: now},
			maxRecords: 100000, maxLag: 500 * time.Millisecond, retryAfter: 4 * time.Second, bound: boundSeconds,
		},
		{name: "no measurement yet", b: kafka.Backlog{Records: 1e9}, maxRecords: 1000, maxLag: time.Second},
		{name: "a stale measurement", b: kafka.Backlog{Records: 1e9, Capacity: 1, MeasuredAt: now.Add(-stale - time.Millisecond)}, maxRecords: 1000, maxLag: time.Second},
		{name: "both bounds off", b: kafka.Backlog{Records: 1e9, Capacity: 1, MeasuredAt: now}, maxRecords: -1, maxLag: -1},
		{
			// 3,000 jobs waited past the bound; at 1,000/s that is 3s.
			name: "past the time bound", b: kafka.Backlog{Records: 3500, Older: 3000, Capacity: 1000, Rate: 10, MeasuredAt: now},
			maxRecords: 100000, maxLag: 500 * time.Millisecond, retryAfter: 3 * time.Second, bound: boundSeconds,
			message: "the executors are 3500 jobs behind (about 3.5s of work at the 1000 jobs/s they drain), 3000 of them waiting longer than the bound of 500ms; nothing was produced: retry after 3s",
		},
		{
			// 1 job at 1,000/s is a millisecond: the floor, the watcher's
			// interval, is the least advised.
			name: "one job past the time bound is the floor", b: kafka.Backlog{Records: 20, Older: 1, Capacity: 1000, MeasuredAt: now},
			maxRecords: 100000, maxLag: 500 * time.Millisecond, retryAfter: 100 * time.Millisecond, bound: boundSeconds,
			message: "1 of them waiting longer than the bound of 500ms; nothing was produced: retry after 100ms",
		},
		{
			// 250 jobs at 1,000/s: a quarter of a second, not a whole one.
			name: "less than a second of work", b: kafka.Backlog{Records: 600, Older: 250, Capacity: 1000, MeasuredAt: now},
			maxRecords: 100000, maxLag: 500 * time.Millisecond, retryAfter: 250 * time.Millisecond, bound: boundSeconds,
		},
		{
			name: "the time bound off", b: kafka.Backlog{Records: 20, Older: 10, Capacity: 1000, MeasuredAt: now},
			maxRecords: 100000, maxLag: -1,
		},
		{
			// No rate known yet: at the rate unmeasuredWork assumes (16,000
			// jobs/s of weight 1) the 200 drain in 12.5ms, under the floor.
			name: "past the records bound, no rate known", b: kafka.Backlog{Records: 1200, MeasuredAt: now},
			maxRecords: 1000, maxLag: time.Second, retryAfter: 100 * time.Millisecond, bound: boundRecords,
			message: "the executors are 1200 jobs behind, past the bound of 1000 jobs; nothing was produced: retry after 100ms",
		},
		{
			// Heavy jobs: the current rate, 1,000/s, is above the 302/s
			// assumed, and 4,000 take 4s at it.
			name: "past the records bound, the current rate known", b: kafka.Backlog{Records: 5000, Rate: 1000, Weight: 53, MeasuredAt: now},
			maxRecords: 1000, maxLag: -1, retryAfter: 4 * time.Second, bound: boundRecords,
		},
		{
			// A group just started: its current rate counts the idle
			// seconds before, 100/s; light jobs are assumed to drain at
			// 4,000/s, and 4,000 take a second.
			name: "past the records bound, the current rate below the assumed one", b: kafka.Backlog{Records: 5000, Rate: 100, Weight: 4, MeasuredAt: now},
			maxRecords: 1000, maxLag: time.Second, retryAfter: time.Second, bound: boundRecords,
		},
		{
			// Both passed: the one farther away decides.
			name: "past both, records farther", b: kafka.Backlog{Records: 9000, Older: 1000, Capacity: 1000, MeasuredAt: now},
			maxRecords: 500, maxLag: time.Second, retryAfter: 8500 * time.Millisecond, bound: boundRecords,
		},
		{
			name: "past both, time farther", b: kafka.Backlog{Records: 9000, Older: 8500, Capacity: 1000, MeasuredAt: now},
			maxRecords: 8000, maxLag: time.Second, retryAfter: 8500 * time.Millisecond, bound: boundSeconds,
		},
		{
			name: "a stalled group's whole backlog is capped at ten seconds", b: kafka.Backlog{Records: 1e7, Older: 1e7, Capacity: 1000, MeasuredAt: now},
			maxRecords: -1, maxLag: time.Second, retryAfter: maxRetryAfter, bound: boundSeconds,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, retryAfter, bound := admission(tc.b, tc.maxRecords, tc.maxLag, stale, 100*time.Millisecond, now, nil)
			if tc.retryAfter == 0 {
				require.Nil(t, e)
				require.Zero(t, retryAfter)
				return
			}
			require.NotNil(t, e)
			require.Equal(t, http.StatusTooManyRequests, e.Status)
			require.Equal(t, CodeExecutorLag, e.Code)
			require.Empty(t, e.Field)
			require.Equal(t, tc.retryAfter, retryAfter)
			require.Equal(t, tc.bound, bound)
			require.Contains(t, e.Message, tc.message)
		})
	}
}

func TestRetryHeaders(t *testing.T) {
	for _, tc := range []struct {
		wait      time.Duration
		after, ms string
	}{
		{100 * time.Millisecond, "1", "100"},
		{250 * time.Millisecond, "1", "250"},
		{time.Second, "1", "1000"},
		{1001 * time.Millisecond, "2", "1001"},
		{maxRetryAfter, "10", "10000"},
	} {
		h := http.Header{}
		retryHeaders(h, tc.wait)
		require.Equal(t, tc.after, h.Get("Retry-After"), "%s: whole seconds, rounded up", tc.wait)
		require.Equal(t, tc.ms, h.Get("Retry-After-Ms"), tc.wait)
	}
}

// Clients refused together are given slots one after another at the
// group's drain rate, each no sooner than the excess needs.
func TestRetrySlotsSpreadARefusedCrowd(t *testing.T) {
	var s retrySlots
	now := time.Now()
	const rate = 100 // jobs a second: a job's slot is 10ms
	var waits []time.Duration
	for range 5 {
		waits = append(waits, s.wait(now, 200*time.Millisecond, 1, rate))
	}
	require.Equal(t, []time.Duration{200 * time.Millisecond, 210 * time.Millisecond, 220 * time.Millisecond, 230 * time.Millisecond, 240 * time.Millisecond}, waits)
	// A batch of 20 jobs takes 20 slots.
	require.Equal(t, 250*time.Millisecond, s.wait(now, 100*time.Millisecond, 20, rate))
	require.Equal(t, 450*time.Millisecond, s.wait(now, 100*time.Millisecond, 1, rate))
	// Later, once the slots have passed, the wait is the excess's again.
	later := now.Add(time.Second)
	require.Equal(t, 100*time.Millisecond, s.wait(later, 100*time.Millisecond, 1, rate))
	// No rate known: nothing to spread by.
	var u retrySlots
	require.Equal(t, time.Second, u.wait(now, time.Second, 1, 0))
	require.Equal(t, time.Second, u.wait(now, time.Second, 1, 0))
	// However many were refused before, a slot is at most maxSpread past
	// the excess's wait: clients that do not wait cannot push it further.
	var c retrySlots
	for range 200 {
		c.wait(now, time.Second, 100, 10)
	}
	require.Equal(t, time.Second+maxSpread, c.wait(now, time.Second, 1, 10))
}
