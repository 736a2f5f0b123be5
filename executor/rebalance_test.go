package executor_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
)

// A member leaves and another joins while jobs stream in: per document,
// operations stay in submission order with no gaps or duplicates, and every
// job is announced.
func TestRebalanceMidStream(t *testing.T) {
	t.Parallel()
	b := setup(t, 12)
	wr := b.reader(b.kenv.Names.WriteReady)
	leaving := b.start(b.config())
	b.start(b.config())

	const docs, perDoc = 100, 20
	all, perDocJobs := interleaved(docs, perDoc)
	half := len(all) / 2
	b.submit(all[:half]...)
	b.waitResults(ids(all[:half/2]), 30*time.Second)

	// One member leaves mid-stream, another joins, while the rest arrives.
	leaving.stop()
	b.start(b.config())
	b.submit(all[half:]...)

	results := b.waitResults(ids(all), 45*time.Second)
	for _, j := range all {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status, "job %s: %+v", j.JobID, results[j.JobID].ErrorHistory)
	}
	for i := range docs {
		b.checkDocument(docName(i), jsondoc.DocumentType, perDocJobs[docName(i)])
	}
	b.writeReadies(wr, ids(all), 30*time.Second)
}

// A concurrent writer moves a document's head between the executor's load
// and its append, again and again: every such append conflicts, and the
// conflicts retry without consuming the retry limit (every job has
// maxRetries 0, so a counted retry would fail it).
func TestConflictsDoNotConsumeRetries(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	core, logs := observer.New(zap.DebugLevel)
	cfg := b.config()
	store := &interferingStore{Store: b.store, reg: b.reg, left: 40}
	cfg.Store = store
	cfg.Logger = zap.New(core)
	cfg.MaxPollRecords = 7 // many small batches, many appends to interfere with
	b.start(cfg)

	const docs, perDoc = 4, 40
	all, perDocJobs := interleaved(docs, perDoc)
	zero := 0
	for _, j := range all {
		j.MaxRetries = &zero
	}
	b.submit(all...)

	results := b.waitResults(ids(all), 45*time.Second)
	for _, j := range all {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status, "job %s: %+v", j.JobID, results[j.JobID].ErrorHistory)
	}
	for i := range docs {
		b.checkDocument(docName(i), jsondoc.DocumentType, perDocJobs[docName(i)])
	}
	conflicts := logs.FilterMessage("append conflict: reloading").Len()
	t.Logf("%d foreign writes, %d conflicts retried", store.writes.Load(), conflicts)
	require.Positive(t, store.writes.Load())
	require.GreaterOrEqual(t, int64(conflicts), store.writes.Load(), "every foreign write made an append conflict")
	require.Zero(t, logs.FilterMessage("job retries after a transient error").Len())
}

// interferingStore is a concurrent writer placed exactly where it hurts:
// before each of the executor's appends (up to left of them) it renames the
// first created document of the batch, so that append's expected revision
// and read-set are stale.
type interferingStore struct {
	oplog.Store
	reg    *model.Registry
	mu     sync.Mutex
	left   int
	writes atomic.Int64
}

func (s *interferingStore) Append(ctx context.Context, reqs []oplog.AppendRequest) ([]oplog.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, req := range reqs {
		if s.left == 0 {
			break
		}
		k := oplog.StreamKey{DocumentID: req.DocumentID, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}
		ops, err := s.Store.ReadStream(ctx, k, 0, 0)
		if err != nil || len(ops) == 0 {
			continue
		}
		st, err := s.reg.ReplayStream(k, "", ops)
		if err != nil {
			return nil, err
		}
		jobID := uuid.NewString()
		a := oplog.Action{ID: uuid.NewString(), Type: model.ActionSetName, Scope: oplog.ScopeDocument, TimestampUtcMs: time.Now().UnixMilli(), Input: []byte(`{"name":"renamed"}`)}
		before := st.Revision
		applied, err := s.reg.Apply(nil, st, &a)
		if err != nil {
			return nil, err
		}
		res, err := s.Store.Append(ctx, []oplog.AppendRequest{{
			DocumentID: req.DocumentID, DocumentType: st.DocumentType,
			Jobs: []oplog.JobOutcome{{JobID: jobID, Status: oplog.JobWriteReady}},
			Streams: []oplog.StreamAppend{{Stream: k, ExpectedRevision: before, Operations: []oplog.Operation{{
				OpID: model.OpID(jobID, 0), JobID: jobID, DocumentID: req.DocumentID, DocumentType: st.DocumentType,
				Scope: k.Scope, Branch: k.Branch, Index: applied.Index, Hash: applied.Hash,
				TimestampUtcMs: a.TimestampUtcMs, Version: applied.Version, Action: a,
			}}}},
		}})
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			return nil, fmt.Errorf("foreign write: %w", err)
		}
		s.left--
		s.writes.Add(1)
		break
	}
	return s.Store.Append(ctx, reqs)
}
