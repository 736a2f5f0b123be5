package projectors_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
)

// A rebuild while writes continue ends with the same tables as a fresh
// replay, reads succeed throughout, and the old generation is gone.
func TestRebuildWhileWriting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.NewWorkload(9)
	recs := w.Random("rb", 40, 150)
	b.startBoth(t, "")
	b.Publish(recs...)
	want, failed := b.Replay()
	require.Empty(t, failed)
	b.waitCaughtUp(t, want, true)
	ids := make([]string, len(w.Docs))
	for i, d := range w.Docs {
		ids[i] = d.ID
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reads, readErrs atomic.Int64
	var lastReadErr atomic.Value
	var wg sync.WaitGroup
	wg.Go(func() { // readers: documents by id and children, all along
		rng := rand.New(rand.NewPCG(1, 2))
		tick := time.NewTicker(5 * time.Millisecond) // a steady trickle, not a busy loop
		defer tick.Stop()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			id := ids[rng.IntN(len(ids))]
			_, err := b.view.Get(ctx, id, oplog.DefaultBranch)
			if err == nil {
				_, err = b.index.Outgoing(ctx, id, oplog.DefaultBranch, "", "", 10)
			}
			if err != nil && ctx.Err() == nil {
				readErrs.Add(1)
				lastReadErr.Store(err)
			}
			reads.Add(1)
		}
	})
	writes := make(chan struct{})
	// Writers: more documents and jobs, appended to the log and announced
	// while the rebuild runs (projtest fails the test on its own errors).
	wg.Go(func() {
		defer close(writes)
		for i := 0; i < 20 && ctx.Err() == nil; i++ {
			b.Publish(w.Random(fmt.Sprintf("rb-more%d", i), 2, 10)...)
		}
	})
	for _, p := range []projectors.Projector{docview.Projector{}, indexer.Projector{}} {
		cfg := b.Config(p, p.Name()+"-rebuild")
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
		rep, err := projectors.Rebuild(rctx, cfg)
		rcancel()
		require.NoError(t, err, "rebuild %s", p.Name())
		require.Positive(t, rep.Built.Healed)
	}
	<-writes
	want, failed = b.Replay()
	require.Empty(t, failed)
	b.waitCaughtUp(t, want, true)
	cancel()
	wg.Wait()
	if err, _ := lastReadErr.Load().(error); err != nil {
		t.Fatalf("%d of %d reads failed during the rebuild, the last: %v", readErrs.Load(), reads.Load(), err)
	}
	require.Positive(t, reads.Load())
	b.requireViewEqualsReplay(t, want)
	b.requireIndexEqualsReplay(t, want)
	var leftovers int
	require.NoError(t, b.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()
AND (tablename LIKE 'document_snapshots_%' OR tablename LIKE 'slug_mappings_%' OR tablename LIKE 'documents_%' OR tablename LIKE 'document_relationships_%')`).Scan(&leftovers))
	require.Zero(t, leftovers, "the old generations are dropped")
	var names int
	require.NoError(t, b.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT projector) FROM projector_streams`).Scan(&names))
	require.Equal(t, 2, names, "heads are kept under the live names only")
}
