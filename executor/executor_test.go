package executor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// Jobs written to the jobs topic by a plain client end WRITE_READY, with
// contiguous operations whose stored hashes a replay reproduces, keyframes
// every 10 revisions, and one write-ready record per job carrying its
// operations.
func TestJobsBecomeWriteReady(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	wr := b.reader(b.kenv.Names.WriteReady)
	b.start(b.config())

	const docs, perDoc = 5, 13
	all, perDocJobs := interleaved(docs, perDoc)
	b.submit(all...)

	results := b.waitResults(ids(all), 30*time.Second)
	for _, j := range all {
		r := results[j.JobID]
		require.Equal(t, oplog.JobWriteReady, r.Status, "job %s: %+v", j.JobID, r.ErrorHistory)
		require.Equal(t, j.DocumentID, r.DocumentID)
		require.Len(t, r.Token.Coordinates, 1)
	}
	for i := range docs {
		b.checkDocument(docName(i), jsondoc.DocumentType, perDocJobs[docName(i)])
		kfs, err := b.store.ListKeyframes(context.Background(), oplog.StreamKey{DocumentID: docName(i), Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
		require.NoError(t, err)
		// A batch writes at most one keyframe per stream, at its head, once
		// the revision crossed a multiple of 10.
		require.NotEmpty(t, kfs, "a stream of %d operations has a keyframe", perDoc-1)
		ops := b.readAll(kfs[0].Stream)
		require.GreaterOrEqual(t, kfs[0].Index, int64(9))
		require.Equal(t, ops[kfs[0].Index].Hash, kfs[0].Hash)
	}

	byJob := b.writeReadies(wr, ids(all), 30*time.Second)
	for _, j := range all {
		recs := byJob[j.JobID]
		require.Len(t, recs, 1, "job %s announced once", j.JobID)
		w := recs[0]
		require.Equal(t, j.DocumentID, w.DocumentID)
		require.Equal(t, jsondoc.DocumentType, w.DocumentType)
		require.False(t, w.OperationsOmitted)
		require.Len(t, w.Operations, 1)
		op := w.Operations[0]
		stored := b.readAll(op.Stream())[op.Index]
		require.Equal(t, stored.OpID, op.OpID)
		require.Equal(t, stored.Hash, op.Hash)
		require.Equal(t, j.JobID, op.JobID)
		require.Equal(t, results[j.JobID].Token, w.ConsistencyToken)
	}
}

// 200 documents × 20 jobs, interleaved across 12 partitions and handled by
// two members: per document, operations in submission order, no gaps, no
// duplicates, and every job announced.
func TestManyDocumentsTwoMembers(t *testing.T) {
	t.Parallel()
	b := setup(t, 12)
	wr := b.reader(b.kenv.Names.WriteReady)
	b.start(b.config())
	b.start(b.config())

	const docs, perDoc = 200, 20
	all, perDocJobs := interleaved(docs, perDoc)
	start := time.Now()
	b.submit(all...)

	results := b.waitResults(ids(all), 45*time.Second)
	t.Logf("%d jobs WRITE_READY %s after submission", len(all), time.Since(start).Round(time.Millisecond))
	for _, j := range all {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status, "job %s: %+v", j.JobID, results[j.JobID].ErrorHistory)
	}
	for i := range docs {
		b.checkDocument(docName(i), jsondoc.DocumentType, perDocJobs[docName(i)])
	}
	b.writeReadies(wr, ids(all), 30*time.Second)
}

// interleaved builds, for each document, a create job and perDoc-1 patch
// jobs, ordered round-robin across documents as concurrent producers would.
func interleaved(docs, perDoc int) ([]*record.Job, map[string][]string) {
	var all []*record.Job
	perDocJobs := map[string][]string{}
	for i := range docs {
		all = append(all, createJob(docName(i), jsondoc.DocumentType))
	}
	for seq := 1; seq < perDoc; seq++ {
		for i := range docs {
			j := patchJob(docName(i), seq)
			all = append(all, j)
			perDocJobs[docName(i)] = append(perDocJobs[docName(i)], j.JobID)
		}
	}
	return all, perDocJobs
}

// A member killed after its Postgres commit and before it produced: on
// restart, no job is applied twice and every write-ready record is produced
// (the committed jobs are re-announced from the log).
func TestKilledAfterAppendReannounces(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	wr := b.reader(b.kenv.Names.WriteReady)
	all, perDocJobs := interleaved(20, 6)
	b.submit(all...)

	var appends atomic.Int32
	cfg := b.config()
	cfg.SetAfterAppend(func() error {
		appends.Add(1)
		return errKilled
	})
	killed := b.start(cfg)
	require.ErrorIs(t, killed.wait(30*time.Second), errKilled)
	require.EqualValues(t, 1, appends.Load())
	committed, err := b.store.JobResults(context.Background(), ids(all))
	require.NoError(t, err)
	require.NotEmpty(t, committed, "the killed member committed its first batch")

	core, logs := observer.New(zap.DebugLevel)
	next := b.config()
	next.Logger = zap.New(zapcore.NewTee(next.Logger.Core(), core))
	b.start(next)
	results := b.waitResults(ids(all), 30*time.Second)
	for _, j := range all {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status)
		if c, ok := committed[j.JobID]; ok {
			require.Equal(t, c.CreatedAt, results[j.JobID].CreatedAt, "job %s was settled once", j.JobID)
		}
	}
	for i := range 20 {
		b.checkDocument(docName(i), jsondoc.DocumentType, perDocJobs[docName(i)])
	}
	b.writeReadies(wr, ids(all), 30*time.Second)
	// Announcing a settled job again is per-job detail: debug, not info.
	again := logs.FilterMessage("job already has a result: announcing it again")
	require.Positive(t, again.Len(), "the committed jobs were announced again")
	require.Equal(t, again.Len(), again.FilterLevelExact(zap.DebugLevel).Len())
	require.Zero(t, logs.FilterMessageSnippet("job ").Filter(func(e observer.LoggedEntry) bool { return e.Level >= zap.InfoLevel }).Len(),
		"no job of a healthy run is logged at info")
}

var errKilled = errors.New("killed between the append and the produce")

// A job is applied all or nothing across the scopes it touches: one whose
// second action fails writes nothing, one that succeeds writes every scope in
// one request and is announced with a range and a coordinate per stream.
func TestJobSpansScopesAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	wr := b.reader(b.kenv.Names.WriteReady)
	b.start(b.config())

	create := createJob("doc-multi", jsondoc.DocumentType)
	failing := mutateJob("doc-multi", jsondoc.DocumentType,
		action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"a": 1}),
		action(oplog.ScopeLocal, jsondoc.ActionJSONPatch, []any{map[string]any{"op": "test", "path": "/missing", "value": 1}}))
	spanning := mutateJob("doc-multi", jsondoc.DocumentType,
		action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"a": 2}),
		action(oplog.ScopeLocal, jsondoc.ActionMergePatch, map[string]any{"b": 3}),
		action(oplog.ScopeDocument, model.ActionSetName, map[string]any{"name": "multi"}))
	b.submit(create, failing, spanning)

	results := b.waitResults(ids([]*record.Job{create, failing, spanning}), 30*time.Second)
	require.Equal(t, oplog.JobFailed, results[failing.JobID].Status)
	r := results[spanning.JobID]
	require.Equal(t, oplog.JobWriteReady, r.Status)
	require.Len(t, r.Streams, 3)
	require.Len(t, r.Token.Coordinates, 3)
	for scope, n := range map[string]int{oplog.ScopeDocument: 2, oplog.ScopeGlobal: 1, oplog.ScopeLocal: 1} {
		ops := b.readAll(oplog.StreamKey{DocumentID: "doc-multi", Scope: scope, Branch: oplog.DefaultBranch})
		require.Len(t, ops, n, "scope %s: the failed job wrote nothing", scope)
		require.Equal(t, spanning.JobID, ops[n-1].JobID)
		_, err := b.reg.ReplayStream(ops[0].Stream(), jsondoc.DocumentType, ops)
		require.NoError(t, err)
	}
	w := b.writeReadies(wr, []string{spanning.JobID}, 30*time.Second)[spanning.JobID][0]
	require.Len(t, w.Streams, 3)
	require.Len(t, w.Operations, 3)
	for n, op := range w.Operations {
		require.Equal(t, spanning.JobID, op.JobID)
		require.Contains(t, []string{model.OpID(spanning.JobID, 0), model.OpID(spanning.JobID, 1), model.OpID(spanning.JobID, 2)}, op.OpID, "operation %d", n)
	}
}

// A job that fails after changing a stream leaves the write cache's head as
// it was: the executor loads heads without copying them and copies a stream
// only when a job changes it, so the next job, served from the cache,
// builds on the last committed state. (Were the head changed, the append's
// expected revision would catch it as a conflict and reload the stream, so
// the test counts conflicts too.)
func TestFailedJobLeavesTheCachedHeadUntouched(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	cfg := b.config()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	b.start(cfg)

	create := createJob("doc-cow", jsondoc.DocumentType)
	first := mutateJob("doc-cow", jsondoc.DocumentType, action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"a": 1}))
	b.submit(create, first)
	b.waitResults(ids([]*record.Job{create, first}), 30*time.Second)

	// Its first action changes the held global head's copy, its second
	// fails: nothing of it may reach the next job.
	failing := mutateJob("doc-cow", jsondoc.DocumentType,
		action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"leaked": true}),
		action(oplog.ScopeGlobal, jsondoc.ActionJSONPatch, []any{map[string]any{"op": "test", "path": "/missing", "value": 1}}))
	b.submit(failing)
	require.Equal(t, oplog.JobFailed, b.waitResults([]string{failing.JobID}, 30*time.Second)[failing.JobID].Status)

	next := mutateJob("doc-cow", jsondoc.DocumentType, action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"b": 2}))
	b.submit(next)
	require.Equal(t, oplog.JobWriteReady, b.waitResults([]string{next.JobID}, 30*time.Second)[next.JobID].Status)

	ops := b.readAll(oplog.StreamKey{DocumentID: "doc-cow", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
	require.Len(t, ops, 2)
	st, err := b.reg.ReplayStream(ops[0].Stream(), jsondoc.DocumentType, ops)
	require.NoError(t, err, "the stored hashes must be those of a replay")
	require.Equal(t, map[string]any{"a": float64(1), "b": float64(2)}, st.State)
	require.Zero(t, conflicts(t, reg), "an append lost a conflict: a cached head was changed")
}

// conflicts reads the executor's append conflict counter from reg.
func conflicts(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == "doclog_executor_append_conflicts_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no doclog_executor_append_conflicts_total among the executor's metrics")
	return 0
}
