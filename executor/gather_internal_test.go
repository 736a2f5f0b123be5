package executor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// gatherExecutor is an executor holding, per partition, jobs of the given
// documents, each with actions actions, in offset order.
func gatherExecutor(maxOps int, parts map[int32][]gatherJob) *Executor {
	e := &Executor{cfg: Config{MaxBatchOperations: maxOps}, parts: map[int32]*partition{}}
	for id, jobs := range parts {
		ps := &partition{id: id, topic: "jobs"}
		for i, j := range jobs {
			job := &record.Job{JobID: fmt.Sprintf("p%d-%d", id, i), DocumentID: j.doc, Kind: record.KindMutate,
				Actions: make([]oplog.Action, j.actions)}
			ps.jobs = append(ps.jobs, &pending{rec: &kgo.Record{Partition: id, Offset: int64(i)}, job: job})
		}
		e.parts[id] = ps
	}
	return e
}

type gatherJob struct {
	doc     string
	actions int
}

func jobIDs(batch []*pending) []string {
	ids := make([]string, len(batch))
	for i, p := range batch {
		ids[i] = p.job.JobID
	}
	return ids
}

// settleAll marks a batch settled, as step would after its append.
func settleAll(batch []*pending) {
	for _, p := range batch {
		p.settled = true
	}
}

func TestGatherBoundsABatchByOperations(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := gatherExecutor(120, map[int32][]gatherJob{
		0: {{"a", 50}, {"b", 50}, {"a", 50}, {"c", 10}, {"d", 300}, {"e", 1}},
	})
	// 50+50 fit, the next 50 would pass 120; nothing after it is taken
	// either, or a later job would overtake the one left behind.
	first := e.gather(now)
	require.Equal(t, []string{"p0-0", "p0-1"}, jobIDs(first))
	settleAll(first)
	second := e.gather(now)
	require.Equal(t, []string{"p0-2", "p0-3"}, jobIDs(second), "50+10 fit; the 300-action job would pass the bound")
	settleAll(second)
	// A job larger than the bound goes alone rather than never.
	third := e.gather(now)
	require.Equal(t, []string{"p0-4"}, jobIDs(third))
	settleAll(third)
	require.Equal(t, []string{"p0-5"}, jobIDs(e.gather(now)))
}

func TestGatherRotatesPartitionsWhenTheBoundCutsABatch(t *testing.T) {
	t.Parallel()
	now := time.Now()
	busy := func(doc string) []gatherJob {
		return []gatherJob{{doc, 40}, {doc, 40}, {doc, 40}, {doc, 40}}
	}
	e := gatherExecutor(80, map[int32][]gatherJob{0: busy("a"), 1: busy("b"), 2: busy("c")})
	var firsts []int32
	for range 6 {
		b := e.gather(now)
		require.Len(t, b, 2, "two jobs of 40 fill a bound of 80")
		firsts = append(firsts, b[0].rec.Partition)
		settleAll(b)
	}
	// Each partition is served first in turn; none waits behind another's
	// whole backlog.
	require.Equal(t, []int32{0, 1, 2, 0, 1, 2}, firsts)
}

func TestGatherTakesEverythingReadyWithinTheBound(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := gatherExecutor(DefaultMaxBatchOperations, map[int32][]gatherJob{
		0: {{"a", 1}, {"b", 1}, {"a", 0}},
		1: {{"c", 3}},
	})
	require.Equal(t, []string{"p0-0", "p0-1", "p0-2", "p1-0"}, jobIDs(e.gather(now)))
	require.Zero(t, e.firstPart, "a batch the bound did not cut leaves the rotation alone")
}
