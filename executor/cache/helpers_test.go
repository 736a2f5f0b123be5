package cache_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor/cache"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
)

// countingStore counts what rebuilds read from the real store.
type countingStore struct {
	oplog.Store
	opsRead      atomic.Int64
	readCalls    atomic.Int64
	kfLookups    atomic.Int64
	keyframesPut atomic.Int64
}

func (s *countingStore) ReadStream(ctx context.Context, k oplog.StreamKey, from int64, limit int) ([]oplog.Operation, error) {
	ops, err := s.Store.ReadStream(ctx, k, from, limit)
	s.readCalls.Add(1)
	s.opsRead.Add(int64(len(ops)))
	return ops, err
}

func (s *countingStore) NearestKeyframe(ctx context.Context, k oplog.StreamKey, atOrBelow int64) (oplog.Keyframe, bool, error) {
	s.kfLookups.Add(1)
	return s.Store.NearestKeyframe(ctx, k, atOrBelow)
}

func (s *countingStore) PutKeyframe(ctx context.Context, kf oplog.Keyframe) error {
	s.keyframesPut.Add(1)
	return s.Store.PutKeyframe(ctx, kf)
}

func (s *countingStore) reset() {
	s.opsRead.Store(0)
	s.readCalls.Store(0)
	s.kfLookups.Store(0)
	s.keyframesPut.Store(0)
}

type bundle struct {
	store *countingStore
	reg   *model.Registry
}

// setup opens the real Postgres store on a fresh migrated schema.
func setup(t testing.TB) *bundle {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresSchema(t))
	require.NoError(t, err)
	cfg.MaxConns = 8
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = postgres.Migrate(ctx, pool)
	require.NoError(t, err)
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	return &bundle{store: &countingStore{Store: postgres.New(pool)}, reg: reg}
}

func (b *bundle) cache(t testing.TB, cfg cache.Config) *cache.Cache {
	t.Helper()
	c, err := cache.New(b.store, b.reg, cfg)
	require.NoError(t, err)
	return c
}

// writer does what the executor does for one document: load through the
// cache, apply, append with the keyframes due, put back.
type writer struct {
	t         testing.TB
	b         *bundle
	c         *cache.Cache
	partition int32
	docID     string
	docType   string
	jobs      int
	clock     int64
}

func (b *bundle) writer(t testing.TB, c *cache.Cache, partition int32, docID, docType string) *writer {
	return &writer{t: t, b: b, c: c, partition: partition, docID: docID, docType: docType, clock: 1_700_000_000_000}
}

func (w *writer) key(scope string) oplog.StreamKey {
	return oplog.StreamKey{DocumentID: w.docID, Scope: scope, Branch: oplog.DefaultBranch}
}

func (w *writer) action(scope, typ, input string) oplog.Action {
	w.clock++
	return oplog.Action{ID: fmt.Sprintf("%s-a%d", w.docID, w.clock), Type: typ, Scope: scope, TimestampUtcMs: w.clock, Input: []byte(input)}
}

// job applies the actions as one job. A model error fails the job and
// nothing is written; the loaded copies are simply dropped.
func (w *writer) job(actions ...oplog.Action) error {
	t := w.t
	t.Helper()
	ctx := context.Background()
	w.jobs++
	jobID := fmt.Sprintf("job-%s-%d", w.docID, w.jobs)
	states := map[string]*model.StreamState{}
	before := map[string]int64{}
	load := func(scope string) {
		if _, ok := states[scope]; ok {
			return
		}
		st, err := w.c.Load(ctx, w.partition, w.key(scope), w.docType)
		require.NoError(t, err)
		states[scope], before[scope] = st, st.Revision
	}
	load(oplog.ScopeDocument)
	ops := map[string][]oplog.Operation{}
	var order []string
	for i := range actions {
		a := actions[i]
		load(a.Scope)
		res, err := w.b.reg.Apply(states[oplog.ScopeDocument], states[a.Scope], &a)
		if err != nil {
			return err
		}
		if _, ok := ops[a.Scope]; !ok {
			order = append(order, a.Scope)
		}
		ops[a.Scope] = append(ops[a.Scope], oplog.Operation{
			OpID: model.OpID(jobID, i), JobID: jobID, DocumentID: w.docID, DocumentType: w.docType,
			Scope: a.Scope, Branch: oplog.DefaultBranch, Index: res.Index, Hash: res.Hash,
			TimestampUtcMs: a.TimestampUtcMs, Version: res.Version, Action: a,
		})
	}
	req := oplog.AppendRequest{
		DocumentID: w.docID, DocumentType: w.docType,
		Jobs: []oplog.JobOutcome{{JobID: jobID, Status: oplog.JobWriteReady}},
		Condition: &oplog.AppendCondition{Streams: []oplog.ConditionStream{
			{Stream: w.key(oplog.ScopeDocument), Revision: before[oplog.ScopeDocument]},
		}},
	}
	for _, scope := range order {
		req.Streams = append(req.Streams, oplog.StreamAppend{Stream: w.key(scope), ExpectedRevision: before[scope], Operations: ops[scope]})
		if st := states[scope]; model.KeyframeDue(before[scope], st.Revision, w.c.Config().KeyframeInterval, st.Size) {
			kf, err := st.Keyframe()
			require.NoError(t, err)
			req.Keyframes = append(req.Keyframes, kf)
		}
	}
	res, err := w.b.store.Append(ctx, []oplog.AppendRequest{req})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	for _, st := range states {
		w.c.Put(w.partition, st)
	}
	return nil
}

func (w *writer) must(actions ...oplog.Action) {
	w.t.Helper()
	require.NoError(w.t, w.job(actions...))
}

// allOps reads a stream from the log without counting.
func (b *bundle) allOps(t testing.TB, k oplog.StreamKey) []oplog.Operation {
	t.Helper()
	ops, err := b.store.Store.ReadStream(context.Background(), k, 0, 0)
	require.NoError(t, err)
	return ops
}
