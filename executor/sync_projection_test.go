package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/record"
)

// A reshuffle reaches the document view as an ordinary write-ready record:
// the executor and a docview runner on the real Kafka and Postgres, a load
// that supersedes a stored operation, and the view then equals a replay of
// the log (state, hash, last index of every scope) with nothing
// quarantined.
func TestDocviewFollowsAReshuffle(t *testing.T) {
	t.Parallel()
	stack := newViewStack(t)
	env, view, produce, wait := stack.env, stack.view, stack.produce, stack.wait

	const doc = "doc-view"
	global := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	for _, j := range []*record.Job{createJob(doc, jsondoc.DocumentType), mutateJob(doc, jsondoc.DocumentType, mark("a1", 10), mark("a2", 30))} {
		rec, err := record.NewJobRecord(env.Kafka.Names.Jobs, j)
		require.NoError(t, err)
		produce(rec)
		require.Equal(t, oplog.JobWriteReady, wait(j.JobID).Status)
	}
	reached := func(last int64) func() bool {
		return func() bool {
			got, err := view.AppliedIndexes(context.Background(), []oplog.StreamKey{global})
			require.NoError(t, err)
			return got[global] == last
		}
	}
	env.Eventually(reached(1), 30*time.Second, "the view did not reach a2")

	b1 := mark("b1", 20)
	load := uuid.NewString()
	produce(&kgo.Record{Topic: env.Kafka.Names.Jobs, Key: []byte(doc),
		Value: rawLoad(load, doc, jsondoc.DocumentType, rawOp("op-b1", 0, 0, hashAfter(t, b1), b1))})
	jr := wait(load)
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	ops, err := env.Log.ReadStream(context.Background(), global, 0, 0)
	require.NoError(t, err)
	require.Len(t, ops, 4)
	require.Equal(t, int64(1), ops[2].Skip, "the load superseded a2")
	env.Eventually(reached(3), 30*time.Second, "the view did not follow the reshuffle")

	want, failed := env.Replay()
	require.Empty(t, failed)
	d, err := view.Get(context.Background(), doc, oplog.DefaultBranch)
	require.NoError(t, err)
	for _, scope := range []string{oplog.ScopeDocument, oplog.ScopeGlobal} {
		st := want[oplog.StreamKey{DocumentID: doc, Scope: scope, Branch: oplog.DefaultBranch}]
		got := d.Scopes[scope]
		require.Equal(t, st.Revision-1, got.LastIndex, scope)
		require.Equal(t, st.Hash, got.Hash, scope)
		v, err := model.DecodeJSON(got.State)
		require.NoError(t, err)
		require.True(t, model.EqualJSON(st.State, v), "%s: the view's state is the replay's", scope)
	}
	require.Equal(t, ops[3].Hash, d.Scopes[oplog.ScopeGlobal].Hash)
	require.Equal(t, map[string]any{"a1": true, "b1": true, "a2": true, "last": "a2"}, want[global].State)
	qs, err := env.Store.Quarantines(context.Background(), docview.Name)
	require.NoError(t, err)
	require.Empty(t, qs, "the skip passed the runner's hash check")
}
