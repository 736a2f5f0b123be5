package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/doclog/doclog/executor"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/record"
)

// viewStack is an executor and a docview runner over one projector test
// environment (the real Kafka and Postgres), with a producer of job
// records.
type viewStack struct {
	t        *testing.T
	env      *projtest.Env
	view     *docview.View
	producer *kgo.Client
}

func newViewStack(t *testing.T) *viewStack {
	t.Helper()
	env := projtest.New(t, docview.Migrations())
	ex, err := executor.New(executor.Config{
		Store: env.Log, Registry: registry(t), Kafka: env.Kafka.Config, Topics: env.Kafka.Names, Group: env.Kafka.Group("executor"),
		SessionTimeout: 3 * time.Second, RebalanceTimeout: 5 * time.Second, HeartbeatInterval: 300 * time.Millisecond,
		FetchMaxWait: 200 * time.Millisecond, RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 300 * time.Millisecond,
		StoreTimeout: 5 * time.Second, ProduceTimeout: 10 * time.Second, ShutdownTimeout: 10 * time.Second,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	})
	require.NoError(t, err)
	require.NoError(t, ex.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, ex.Stop(context.Background())) })
	env.Start(env.Config(docview.Projector{}, "docview"))
	return &viewStack{t: t, env: env, view: docview.NewView(env.Pool, env.Store),
		producer: env.Kafka.Client(kgo.ProducerLinger(0), kgo.UnknownTopicRetries(-1))}
}

func (s *viewStack) produce(recs ...*kgo.Record) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(s.t, s.producer.ProduceSync(ctx, recs...).FirstErr())
}

// wait returns a job's result once it has one.
func (s *viewStack) wait(id string) oplog.JobResult {
	s.t.Helper()
	var jr oplog.JobResult
	s.env.Eventually(func() bool {
		res, err := s.env.Log.JobResults(context.Background(), []string{id})
		require.NoError(s.t, err)
		jr = res[id]
		return jr.Status != ""
	}, 30*time.Second, "job "+id+" has no result")
	return jr
}

// Promotes that supersede a whole scope reach the document view as
// ordinary write-ready records: the executor and a docview runner on the
// real Kafka and Postgres, a promote between branches with no fork between
// them, one onto a scope the branches share nothing of, and one onto a
// target that moved past the one operation it shares with the source;
// after each, the view of the target equals a replay of
// the log (state, hash, last index of every scope) and of the source, with
// nothing quarantined.
func TestDocviewFollowsWholeScopePromotes(t *testing.T) {
	t.Parallel()
	stack := newViewStack(t)
	env, view := stack.env, stack.view
	run := func(jobs ...*record.Job) {
		for _, j := range jobs {
			rec, err := record.NewJobRecord(env.Kafka.Names.Jobs, j)
			require.NoError(t, err)
			stack.produce(rec)
			jr := stack.wait(j.JobID)
			require.Equal(t, oplog.JobWriteReady, jr.Status, "%s: %+v", j.Kind, jr.ErrorHistory)
		}
	}
	// viewEqualsReplay waits for the view of a branch to reach the log's
	// head, then compares every scope with a replay.
	viewEqualsReplay := func(doc, branch, source string) {
		t.Helper()
		keys := []oplog.StreamKey{{DocumentID: doc, Scope: oplog.ScopeDocument, Branch: branch}, {DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: branch}}
		env.Eventually(func() bool {
			heads, err := env.Log.Heads(context.Background(), []string{doc})
			require.NoError(t, err)
			got, err := view.AppliedIndexes(context.Background(), keys)
			require.NoError(t, err)
			for _, k := range keys {
				if got[k] != heads[k]-1 {
					return false
				}
			}
			return true
		}, 30*time.Second, "the view of "+branch+" did not reach the log's head")
		want, failed := env.Replay()
		require.Empty(t, failed)
		d, err := view.Get(context.Background(), doc, branch)
		require.NoError(t, err)
		for _, k := range keys {
			st, src := want[k], want[oplog.StreamKey{DocumentID: doc, Scope: k.Scope, Branch: source}]
			got := d.Scopes[k.Scope]
			require.Equal(t, st.Revision-1, got.LastIndex, k.String())
			require.Equal(t, st.Hash, got.Hash, k.String())
			require.Equal(t, src.Hash, got.Hash, "%s: the view holds the source's state", k)
			v, err := model.DecodeJSON(got.State)
			require.NoError(t, err)
			require.True(t, model.EqualJSON(st.State, v), "%s: the view's state is the replay's", k)
		}
	}
	main := oplog.DefaultBranch

	const unrelated = "view-unrelated"
	run(createJob(unrelated, jsondoc.DocumentType), setJob(unrelated, main, "m1"), setJob(unrelated, main, "m2"),
		onBranch(createJob(unrelated, jsondoc.DocumentType), "solo"), setJob(unrelated, "solo", "s1"))
	viewEqualsReplay(unrelated, "solo", "solo")
	run(promoteJob(unrelated, "solo", main, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 2}))
	viewEqualsReplay(unrelated, main, "solo")

	const moved = "view-moved"
	run(createJob(moved, jsondoc.DocumentType), setJob(moved, main, "m1"), forkJob(moved, main, "draft", nil),
		setJob(moved, main, "m2"), setJob(moved, main, "m3"))
	viewEqualsReplay(moved, main, main)
	run(promoteJob(moved, "draft", main, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 3}))
	viewEqualsReplay(moved, main, "draft")

	const disjoint = "view-disjoint"
	run(createJob(disjoint, jsondoc.DocumentType), setJob(disjoint, main, "m1"),
		forkJob(disjoint, main, "draft", map[string]int64{oplog.ScopeGlobal: 0}), setJob(disjoint, main, "m2"), setJob(disjoint, "draft", "d1"))
	viewEqualsReplay(disjoint, main, main)
	run(promoteJob(disjoint, "draft", main, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 2}))
	viewEqualsReplay(disjoint, main, "draft")

	qs, err := env.Store.Quarantines(context.Background(), docview.Name)
	require.NoError(t, err)
	require.Empty(t, qs, "every skip passed the runner's hash check")
}
