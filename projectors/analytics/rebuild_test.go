package analytics_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/projtest"
)

// TestRebuildWhileWriting rebuilds the analytics tables under a live
// runner while jobs keep arriving and readers keep counting: no read fails
// or sees fewer operations than one before it, a row the log never held is
// gone afterwards, the tables equal the log, the old generation is dropped,
// and the live runner goes on writing into the new tables.
func TestRebuildWhileWriting(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	p := newProjector(t, fastBatches)
	w := env.NewWorkload(21)
	env.Publish(w.Random("rb", 30, 150)...)
	env.Start(p.RunnerConfig(env.Config(p, "analytics")))
	env.Eventually(func() bool { return countsMatch(t, p, logCounts(t, env)) }, catchUp, "the live tables reach the log")
	waitCheckpoints(t, env, p.Name())

	// A row no operation of the log stands for: only a build from the log
	// removes it.
	ctx := context.Background()
	b, err := p.Conn().PrepareBatch(ctx, "INSERT INTO "+p.Database()+".operations (document_id, scope, branch, idx, op_id, ordinal)")
	require.NoError(t, err)
	require.NoError(t, b.Append("stray", oplog.ScopeGlobal, oplog.DefaultBranch, int64(0), "stray-op", uint64(1)))
	require.NoError(t, b.Send())
	require.Contains(t, query(t, p, "SELECT document_id FROM "+p.Database()+".operations WHERE document_id = 'stray'"), []string{"stray"})

	rctx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	var reads, readErrs atomic.Int64
	var lastErr atomic.Value
	var shrank atomic.Value
	var wg sync.WaitGroup
	wg.Go(func() {
		var last uint64
		tick := time.NewTicker(5 * time.Millisecond) // a steady trickle, not a busy loop
		defer tick.Stop()
		for rctx.Err() == nil {
			select {
			case <-rctx.Done():
				return
			case <-tick.C:
			}
			counts, err := p.OperationCounts(rctx, oplog.DefaultBranch)
			if err != nil {
				if rctx.Err() == nil {
					readErrs.Add(1)
					lastErr.Store(err)
				}
				continue
			}
			var total uint64
			for id, n := range counts {
				if id != "stray" {
					total += n
				}
			}
			if total < last {
				shrank.Store(fmt.Sprintf("a read saw %d operations after one saw %d", total, last))
			}
			last = total
			reads.Add(1)
		}
	})
	writes := make(chan struct{})
	wg.Go(func() {
		defer close(writes)
		for i := 0; i < 15 && rctx.Err() == nil; i++ {
			env.Publish(w.Random(fmt.Sprintf("rb-more%d", i), 2, 8)...)
		}
	})

	bctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	rep, err := projectors.Rebuild(bctx, p.RunnerConfig(env.Config(p, "analytics")))
	require.NoError(t, err)
	require.Positive(t, rep.Built.Healed)
	<-writes

	// The live runner writes into the new tables: one more batch arrives
	// after the switch and is counted.
	env.Publish(w.Random("rb-after", 3, 12)...)
	want := logCounts(t, env)
	env.Eventually(func() bool { return countsMatch(t, p, want) }, catchUp, "the rebuilt tables reach the log")
	waitCheckpoints(t, env, p.Name())
	checkDocuments(t, env, p)
	stopReaders()
	wg.Wait()
	if err, _ := lastErr.Load().(error); err != nil {
		t.Fatalf("%d of %d reads failed during the rebuild, the last: %v", readErrs.Load(), reads.Load(), err)
	}
	if msg, _ := shrank.Load().(string); msg != "" {
		t.Fatal(msg)
	}
	require.Positive(t, reads.Load())

	tables := query(t, p, "SELECT name FROM system.tables WHERE database = ? ORDER BY name", p.Database())
	require.Equal(t, [][]string{{"documents"}, {"operations"}}, tables, "only the live tables are left")
	var names []string
	rows, err := env.Pool.Query(ctx, `SELECT DISTINCT projector FROM projector_streams UNION SELECT DISTINCT projector FROM projector_checkpoints ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{p.Name()}, names, "the runner's state is kept under the live name only")
	t.Logf("%d reads during the rebuild; built %d operations of %d documents, caught up in %v",
		reads.Load(), rep.Built.Healed, rep.Built.Documents, rep.CatchUp)
}

// A rebuild that cannot finish (its context ends while it builds) leaves
// the live tables as they were and drops what it built.
func TestAbandonedRebuildLeavesNothing(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	p := newProjector(t, fastBatches)
	env.Publish(env.NewWorkload(22).Random("ab", 10, 40)...)
	env.Start(p.RunnerConfig(env.Config(p, "analytics")))
	want := logCounts(t, env)
	env.Eventually(func() bool { return countsMatch(t, p, want) }, catchUp, "the live tables reach the log")

	// The new generation's first batch waits for the end of the context,
	// which ends as soon as that batch has begun: its tables exist, and
	// the switch can never come.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	building := make(chan struct{}, 1)
	cfg := p.RunnerConfig(env.Config(p, "analytics"))
	cfg.Projector = stuckBuild{Projector: p, building: building}
	go func() {
		<-building
		cancel()
	}()
	_, err := projectors.Rebuild(ctx, cfg)
	require.ErrorIs(t, err, context.Canceled)
	tables := query(t, p, "SELECT name FROM system.tables WHERE database = ? ORDER BY name", p.Database())
	require.Equal(t, [][]string{{"documents"}, {"operations"}}, tables)
	require.True(t, countsMatch(t, p, want))
}

// stuckBuild is the analytics projector whose new generations never apply
// a batch: Apply waits for the end of its context.
type stuckBuild struct {
	*analytics.Projector
	building chan struct{}
}

func (s stuckBuild) WithGeneration(gen string) projectors.Projector {
	return stuckApply{Projector: s.Projector.WithGeneration(gen), building: s.building}
}

type stuckApply struct {
	projectors.Projector
	building chan struct{}
}

func (s stuckApply) Apply(ctx context.Context, _ projectors.Tx, _ []projectors.Change) error {
	select {
	case s.building <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// fastBatches makes the projector's fetches return at once, so that a test
// waits on its work, not on the batch delay.
func fastBatches(c *analytics.Config) {
	c.BatchDelay = 20 * time.Millisecond
	c.BatchMinBytes = 1
}
