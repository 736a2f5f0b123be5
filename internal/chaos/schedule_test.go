package chaos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScheduleIsTheSeeds(t *testing.T) {
	a, b, c := Full.Schedule(3), Full.Schedule(3), Full.Schedule(4)
	assert.Equal(t, a, b, "one seed, one schedule")
	assert.NotEqual(t, a, c, "another seed, another schedule")
}

func TestScheduleHasWhatTheProfileAsks(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 99} {
		faults := Full.Schedule(seed)
		kinds := map[string]int{}
		targets := map[string]bool{}
		join, leave := -1, -1
		for i, f := range faults {
			kinds[f.Kind]++
			switch f.Kind {
			case FaultKill:
				targets[f.Target] = true
				assert.GreaterOrEqual(t, f.Delay.Seconds(), 0.5, "restart delay of %s", f)
				assert.LessOrEqual(t, f.Delay, Full.MaxRestartWait, "restart delay of %s", f)
			case FaultJoin:
				join = i
			case FaultLeave:
				leave = i
			case FaultCutBroker, FaultCutPostgres:
				assert.Equal(t, Full.CutLength, f.Delay)
			}
			if i > 0 {
				assert.Greater(t, f.At, faults[i-1].At, "faults in time order")
			}
		}
		assert.Equal(t, map[string]int{FaultKill: 22, FaultKillIngest: 1, FaultKillBroker: 1, FaultCrashPostgres: 1,
			FaultJoin: 1, FaultLeave: 1, FaultCutPostgres: 1, FaultCutBroker: 1}, kinds, "seed %d", seed)
		assert.Len(t, targets, len(killable), "every killable member is hit, seed %d", seed)
		require.NotEqual(t, -1, join)
		assert.Less(t, join, leave, "the third executor joins before it leaves, seed %d", seed)
		assert.GreaterOrEqual(t, faults[0].At, Full.Warmup)
		assert.LessOrEqual(t, faults[len(faults)-1].At, Full.Warmup+Full.Spread)
	}
}

func TestShortScheduleKillsFiveAndTheBroker(t *testing.T) {
	kinds := map[string]int{}
	for _, f := range Short.Schedule(7) {
		kinds[f.Kind]++
	}
	assert.GreaterOrEqual(t, kinds[FaultKill]+kinds[FaultKillIngest], 5)
	assert.Equal(t, 1, kinds[FaultKillBroker])
}
