package executor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor/place"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// readCounter is the Postgres log counting, per stream, the operations
// ReadStream returns and the lowest index it is asked to read from.
type readCounter struct {
	*postgres.Store
	mu     sync.Mutex
	rows   map[oplog.StreamKey]int
	lowest map[oplog.StreamKey]int64
}

func (s *readCounter) ReadStream(ctx context.Context, k oplog.StreamKey, from int64, limit int) ([]oplog.Operation, error) {
	ops, err := s.Store.ReadStream(ctx, k, from, limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[k] += len(ops)
	if low, ok := s.lowest[k]; !ok || from < low {
		s.lowest[k] = from
	}
	return ops, err
}

// reset forgets what was counted and returns it.
func (s *readCounter) reset(k oplog.StreamKey) (rows int, lowest int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, lowest = s.rows[k], s.lowest[k]
	s.rows, s.lowest = map[oplog.StreamKey]int{}, map[oplog.StreamKey]int64{}
	return rows, lowest
}

// A load into a stream of 2,501 operations reads the end of it, not all of
// it: with a skip threshold of 100, a backdated load that supersedes five
// operations reads a window of about a hundred operations and the
// keyframe before it, and stores what placing it from index 0 would (the
// same operations, indexes, skip and hashes); a replay of an operation far
// before the window is found without reading there.
func TestLoadIntoALongStreamReadsAWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	counting := &readCounter{Store: b.store.(*postgres.Store)}
	counting.reset(oplog.StreamKey{})
	cfg := b.config()
	cfg.Store, cfg.MaxSkipThreshold = counting, 100
	b.start(cfg)

	const doc = "long-doc"
	global := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	jobs := []*record.Job{createJob(doc, jsondoc.DocumentType)}
	n := 0
	for range 25 {
		var actions []oplog.Action
		for range 100 {
			actions = append(actions, mark(fmt.Sprintf("m%04d", n), int64(n*10)))
			n++
		}
		jobs = append(jobs, mutateJob(doc, jsondoc.DocumentType, actions...))
	}
	jobs = append(jobs, mutateJob(doc, jsondoc.DocumentType, mark("last", int64(n*10))))
	b.run(oplog.JobWriteReady, jobs...) // one append each, so a keyframe every hundred operations
	stored := b.readAll(global)
	require.Len(t, stored, 2501)
	keyframes, err := b.store.ListKeyframes(context.Background(), global)
	require.NoError(t, err)
	require.Greater(t, len(keyframes), 20)

	// What placing the load from index 0 stores.
	late := place.Incoming{OpID: "op-late", Index: 2496, Hash: "unchecked", Action: mark("late", int64(2495*10+5))}
	plan, err := place.Load(global, place.Whole(stored), []place.Incoming{late}, 100)
	require.NoError(t, err)
	require.Equal(t, int64(5), plan.Skip)
	docKey := global
	docKey.Scope = oplog.ScopeDocument
	docState, err := b.reg.ReplayStream(docKey, jsondoc.DocumentType, b.readAll(docKey))
	require.NoError(t, err)
	head, err := b.reg.ReplayStream(global, jsondoc.DocumentType, stored)
	require.NoError(t, err)
	want, _, err := place.Derive(b.reg, docState, head, place.Whole(stored), plan)
	require.NoError(t, err)

	counting.reset(global)
	load := uuid.NewString()
	b.produceRaw(doc, rawLoad(load, doc, jsondoc.DocumentType, rawOp(late.OpID, late.Index, 0, late.Hash, late.Action)))
	jr := b.waitResults([]string{load}, 30*time.Second)[load]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	rows, lowest := counting.reset(global)
	t.Logf("the load read %d operations of the stream, from index %d", rows, lowest)
	require.Less(t, rows, 130, "the load read %d operations of a stream of 2,501", rows)
	require.GreaterOrEqual(t, lowest, int64(2501-101-100), "from the keyframe before the window")
	got := b.readAll(global)[2501:]
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].OpID, got[i].OpID, "position %d", i)
		require.Equal(t, want[i].Index, got[i].Index)
		require.Equal(t, want[i].Skip, got[i].Skip)
		require.Equal(t, want[i].Hash, got[i].Hash, "%s: the hash the placement from index 0 derives", got[i].OpID)
	}
	b.checkReplay(global)

	// A replay of the stream's tenth operation, 2,400 before the window.
	replay := uuid.NewString()
	tenth := stored[10]
	b.produceRaw(doc, rawLoad(replay, doc, jsondoc.DocumentType, rawOp(tenth.OpID, tenth.Index, 0, tenth.Hash, tenth.Action)))
	jr = b.waitResults([]string{replay}, 30*time.Second)[replay]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	require.NotNil(t, jr.Load)
	require.Equal(t, []oplog.LoadStream{{Stream: global, Replayed: 1}}, jr.Load.Streams, "a replay only")
	rows, _ = counting.reset(global)
	require.Less(t, rows, 130)
	require.Len(t, b.readAll(global), 2501+len(want), "nothing written")
}

// checkReplay replays a stream from index 0 and requires every stored hash
// reproduced.
func (b *bundle) checkReplay(k oplog.StreamKey) {
	b.t.Helper()
	_, err := b.reg.ReplayStream(k, jsondoc.DocumentType, b.readAll(k))
	require.NoError(b.t, err, "replay %s", k)
}
