package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/executor/place"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
)

// rowCounter counts the operations ReadStream returns.
type rowCounter struct {
	*postgres.Store
	rows atomic.Int64
}

func (s *rowCounter) ReadStream(ctx context.Context, k oplog.StreamKey, from int64, limit int) ([]oplog.Operation, error) {
	ops, err := s.Store.ReadStream(ctx, k, from, limit)
	s.rows.Add(int64(len(ops)))
	return ops, err
}

// longStream writes a doclog/json document whose global stream holds n
// operations (a constant-size state, each a merge patch), a hundred per
// append with a keyframe each, as an executor writing jobs of a hundred
// actions does. It returns the document scope's state and the stream's
// head.
func longStream(tb testing.TB, store oplog.Store, reg *model.Registry, docID string, n int) (doc, head *model.StreamState) {
	tb.Helper()
	ctx := context.Background()
	docKey := oplog.StreamKey{DocumentID: docID, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}
	global := docKey
	global.Scope = oplog.ScopeGlobal
	doc = model.NewStreamState(docKey, jsondoc.DocumentType)
	head = model.NewStreamState(global, jsondoc.DocumentType)
	input, err := json.Marshal(model.CreateDocumentInput{DocumentType: jsondoc.DocumentType})
	require.NoError(tb, err)
	build := func(st *model.StreamState, job string, actions []oplog.Action) []oplog.Operation {
		var ops []oplog.Operation
		for i := range actions {
			a := actions[i]
			ap, err := reg.Apply(doc, st, &a)
			require.NoError(tb, err)
			ops = append(ops, oplog.Operation{OpID: model.OpID(job, i), JobID: job, DocumentID: docID, DocumentType: jsondoc.DocumentType,
				Scope: st.Stream.Scope, Branch: st.Stream.Branch, Index: ap.Index, Hash: ap.Hash, TimestampUtcMs: a.TimestampUtcMs, Version: ap.Version, Action: a})
		}
		return ops
	}
	appendOps := func(st *model.StreamState, job string, ops []oplog.Operation) {
		kf, err := st.Keyframe()
		require.NoError(tb, err)
		res, err := store.Append(ctx, []oplog.AppendRequest{{DocumentID: docID, DocumentType: jsondoc.DocumentType,
			Jobs:      []oplog.JobOutcome{{JobID: job, Status: oplog.JobWriteReady}},
			Streams:   []oplog.StreamAppend{{Stream: st.Stream, ExpectedRevision: st.Revision - int64(len(ops)), Operations: ops}},
			Keyframes: []oplog.Keyframe{kf}}})
		require.NoError(tb, err)
		require.NoError(tb, res[0].Err)
	}
	create := oplog.Action{ID: "create", Type: model.ActionCreateDocument, Scope: oplog.ScopeDocument, Input: input}
	appendOps(doc, "job-create", build(doc, "job-create", []oplog.Action{create}))
	for j := 0; j < n; j += 100 {
		job := fmt.Sprintf("job-%06d", j)
		var actions []oplog.Action
		for i := j; i < min(j+100, n); i++ {
			actions = append(actions, oplog.Action{ID: fmt.Sprintf("a%06d", i), Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal,
				TimestampUtcMs: int64(i * 10), Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		}
		appendOps(head, job, build(head, job, actions))
	}
	return doc, head
}

// BenchmarkLoadIntoALongStream places a backdated load (one operation
// superseding the stream's last five) into a stream of 20,000 operations,
// as the executor does between reading the heads and appending: read what
// placement needs, plan, re-derive. "from-0" reads the whole stream and
// replays it up to the merge (the executor's read when the skip threshold
// reaches index 0); "window" reads from the keyframe before the default
// threshold's reach (1,000 behind the head). Sub-benchmarks alternate when
// run with -count.
func BenchmarkLoadIntoALongStream(b *testing.B) {
	store := &rowCounter{Store: postgres.New(migratedPool(b, testenv.PostgresSchema(b)))}
	reg := registry(b)
	const n = 20000
	doc, head := longStream(b, store, reg, "long-bench", n)
	late := place.Incoming{OpID: "op-late", Index: n - 5, Action: oplog.Action{ID: "late", Type: jsondoc.ActionMergePatch,
		Scope: oplog.ScopeGlobal, TimestampUtcMs: int64((n-5)*10 - 5), Input: json.RawMessage(`{"late":true}`)}}
	for _, c := range []struct {
		name    string
		maxSkip int64
	}{{"from-0", n}, {"window", place.DefaultMaxSkipThreshold}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := executor.Config{Store: store, Registry: reg, MaxSkipThreshold: c.maxSkip, StoreTimeout: time.Minute}
			store.rows.Store(0)
			for b.Loop() {
				st, err := executor.ReadStored(context.Background(), cfg, head.Stream, head, []string{late.OpID})
				if err != nil {
					b.Fatal(err)
				}
				// The plan is decided by the default threshold either way;
				// only the read differs.
				p, err := place.Load(head.Stream, *st, []place.Incoming{late}, place.DefaultMaxSkipThreshold)
				if err != nil {
					b.Fatal(err)
				}
				if p.Skip != 5 {
					b.Fatalf("skip %d, not 5", p.Skip)
				}
				if _, _, err := place.Derive(reg, doc, head, *st, p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(store.rows.Load())/float64(b.N), "rows/op")
		})
	}
}
