package kafka

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// at is the time of a sample ms milliseconds into a test's measurements.
func at(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }

// The drain rate is the committed offsets' progress over about a second;
// the capacity is the fastest rate of a window the group was busy
// throughout, kept while the group stalls and while it idles.
func TestBacklogRateAndCapacity(t *testing.T) {
	w := &BacklogWatcher{}

	// Busy: 1,000 records waiting throughout, 500 committed per 100ms.
	var b Backlog
	for i := 0; i <= 20; i++ {
		b = w.add(sample{at: at(100 * i), committed: int64(500 * i), lag: 1000})
	}
	require.InDelta(t, 5000, b.Rate, 1)
	require.InDelta(t, 5000, b.Capacity, 1)
	s, ok := b.Seconds()
	require.True(t, ok)
	require.InDelta(t, 0.2, s, 0.001)

	// Stalled: the offsets stop, the backlog grows; the rate falls to 0
	// and the capacity stays, so the backlog reads as ever more work.
	for i := 21; i <= 40; i++ {
		b = w.add(sample{at: at(100 * i), committed: 10000, lag: int64(1000 + 100*(i-20))})
	}
	require.Zero(t, b.Rate)
	require.InDelta(t, 5000, b.Capacity, 1)
	s, _ = b.Seconds()
	require.InDelta(t, 3000.0/5000, s, 0.001)

	// Idle for two minutes (a trickle with nothing waiting at times is not
	// busy): nothing has shown the capacity for longer than the window,
	// and what the group does now is unknown.
	for i := 41; i <= 1240; i++ {
		b = w.add(sample{at: at(100 * i), committed: int64(10000 + i - 40), lag: int64(i % 2)})
	}
	require.InDelta(t, 10, b.Rate, 1)
	require.Zero(t, b.Capacity)

	// Busy again but slower (larger jobs), for a few seconds.
	base := int64(10000 + 1200)
	for i := 1241; i <= 1241+40; i++ {
		b = w.add(sample{at: at(100 * i), committed: base + int64(200*(i-1240)), lag: 5000})
	}
	require.InDelta(t, 2000, b.Rate, 1)
	require.InDelta(t, 2000, b.Capacity, 1)
}

// Between measurements the backlog counts what this process produced since
// the measurement started, less the drain at the measured rate.
func TestBacklogBetweenMeasurements(t *testing.T) {
	w := &BacklogWatcher{}
	require.True(t, w.Backlog().MeasuredAt.IsZero(), "no measurement yet")
	w.Produced(5, 0)
	w.last.Store(&measurement{Backlog: Backlog{Records: 100, MeasuredAt: time.Now()}, produced: 3})
	w.Produced(40, 0)
	require.Equal(t, int64(100+2+40), w.Backlog().Records)

	w.last.Store(&measurement{Backlog: Backlog{Records: 100, Rate: 1000, MeasuredAt: time.Now().Add(-time.Second)}, produced: w.produced.Load()})
	require.Zero(t, w.Backlog().Records, "a second at 1,000 records/s drains the 100 and does not go below 0")
}

// Records reserved are in the backlog until released, and a measurement's
// snapshot of what was produced does not take them: a reservation whose
// produce is in flight when the measurement starts is still counted.
func TestBacklogCountsReservations(t *testing.T) {
	w := &BacklogWatcher{}
	w.last.Store(&measurement{Backlog: Backlog{Records: 10, MeasuredAt: time.Now()}})
	w.Reserve(3)
	require.Equal(t, int64(13), w.Backlog().Records)
	// Two produced, one given up.
	w.Release(2)
	w.Produced(2, 0)
	w.Release(1)
	require.Equal(t, int64(12), w.Backlog().Records)
	// A measurement taken while a reservation is in flight.
	w.Reserve(5)
	w.last.Store(&measurement{Backlog: Backlog{Records: 12, MeasuredAt: time.Now()}, produced: w.produced.Load()})
	require.Equal(t, int64(17), w.Backlog().Records)
	w.Release(5)
	w.Produced(5, 0)
	require.Equal(t, int64(17), w.Backlog().Records, "produced after the measurement: counted until the next one")
}

// The capacity is kept as work: measured while records of weight 1 were
// produced, it stands for fewer records once records of 50 are, and for the
// measured number again once those are produced no more.
func TestBacklogCapacityFollowsTheWeightOfRecords(t *testing.T) {
	w := &BacklogWatcher{}
	// Busy with light records: 200 committed per 100 ms.
	w.Produced(1000, 1000)
	w.weigh()
	var b Backlog
	for i := 0; i <= 10; i++ {
		b = w.add(sample{at: at(100 * i), committed: int64(200 * i), lag: 500})
	}
	require.InDelta(t, 2000, b.Capacity, 1)
	// Idle, then records of weight 50 are produced: the capacity measured
	// on light ones is 2,000 of weight 1 a second, 40 of these.
	w.Produced(100, 5000)
	w.weigh()
	b = w.add(sample{at: at(1200), committed: 2000, lag: 0})
	require.InDelta(t, 40, b.Capacity, 1)
	s, ok := b.Seconds()
	require.True(t, ok)
	require.Zero(t, s)
	// Light records again: the weight per record falls back, smoothed.
	w.Produced(1000, 1000)
	w.weigh()
	w.weigh() // a measurement with nothing produced keeps the figure
	require.InDelta(t, 25.5, w.weightPerRecord(), 0.01)
	w.Produced(1000, 1000)
	w.weigh()
	w.Produced(1000, 1000)
	w.weigh()
	require.Less(t, w.weightPerRecord(), 8.0)
	// Heavier again: counted at once.
	w.Produced(10, 500)
	w.weigh()
	require.InDelta(t, 50, w.weightPerRecord(), 0.01)
}

// With a MaxAge, a window counts towards the capacity only when records
// older than it waited throughout: a group that has records waiting at
// every measurement but keeps up with them (none aged) shows the rate it
// was given, not what it drains, and a capacity measured while it was
// behind lapses once it has kept up for the window; a stall keeps it.
func TestBacklogCapacityCountsOnlyWhileBehind(t *testing.T) {
	w := &BacklogWatcher{cfg: BacklogConfig{MaxAge: 300 * time.Millisecond}}
	var b Backlog
	// Kept up with: 100 records waiting at every measurement, none older
	// than MaxAge, 50 committed per 100 ms.
	for i := 0; i <= 20; i++ {
		b = w.add(sample{at: at(100 * i), committed: int64(50 * i), lag: 100})
	}
	require.InDelta(t, 500, b.Rate, 1)
	require.Zero(t, b.Capacity, "a group keeping up has shown no capacity")

	// Behind: records older than MaxAge throughout, 400 committed per 100 ms.
	base := int64(50 * 20)
	for i := 21; i <= 40; i++ {
		b = w.add(sample{at: at(100 * i), committed: base + int64(400*(i-20)), lag: 3000, older: 800})
	}
	require.InDelta(t, 4000, b.Capacity, 1)

	// Kept up with again: the capacity is held for the window, then lapses.
	base += 400 * 20
	for i := 41; i <= 50; i++ {
		b = w.add(sample{at: at(100 * i), committed: base + int64(50*(i-40)), lag: 100})
	}
	require.InDelta(t, 4000, b.Capacity, 1, "within the window of the last peak")
	for i := 51; i <= 70; i++ {
		b = w.add(sample{at: at(100 * i), committed: base + int64(50*(i-40)), lag: 100})
	}
	require.Zero(t, b.Capacity, "kept up with for longer than the window")

	// Behind again, then stalled: no progress, the records ageing; the
	// capacity stays.
	base += 50 * 30
	for i := 71; i <= 90; i++ {
		b = w.add(sample{at: at(100 * i), committed: base + int64(300*(i-70)), lag: 3000, older: 900})
	}
	require.InDelta(t, 3000, b.Capacity, 1)
	base += 300 * 20
	for i := 91; i <= 130; i++ {
		b = w.add(sample{at: at(100 * i), committed: base, lag: 3000, older: 3000})
	}
	require.Zero(t, b.Rate)
	require.InDelta(t, 3000, b.Capacity, 1, "a stall keeps the capacity")
}
