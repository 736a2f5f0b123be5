package executor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// setJob is a doclog/json job that merges {key: true} into global.
func setJob(docID, branch, key string) *record.Job {
	j := mutateJob(docID, jsondoc.DocumentType, action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{key: true}))
	j.Branch = branch
	return j
}

// globalOf is a branch's global state as a replay of the log gives it.
func (b *bundle) globalOf(docID, branch string) map[string]any {
	b.t.Helper()
	var v map[string]any
	require.NoError(b.t, json.Unmarshal(b.branchState(docID, branch)[oplog.ScopeGlobal], &v))
	return v
}

// run submits jobs one after another and requires each to end with status.
func (b *bundle) run(status oplog.JobStatus, jobs ...*record.Job) {
	b.t.Helper()
	for _, j := range jobs {
		b.submit(j)
		jr := b.waitResults([]string{j.JobID}, 30*time.Second)[j.JobID]
		require.Equal(b.t, status, jr.Status, "%s %s: %+v", j.Kind, j.JobID, jr.ErrorHistory)
	}
}

// Promotes the sync points alone cannot express: between branches with no
// fork between them, onto a scope the branches share nothing of, onto a
// target that moved when the source did not and they share one operation,
// and from a source that lacks a scope. Each applies (the source wins every
// scope it has, its states re-derived and hashed) or, with a stale tip, is
// a BranchConflict with nothing written.
func TestPromoteWholeScopes(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.start(b.config())
	main := oplog.DefaultBranch
	stream := func(doc, scope, branch string) oplog.StreamKey {
		return oplog.StreamKey{DocumentID: doc, Scope: scope, Branch: branch}
	}

	t.Run("no fork between them", func(t *testing.T) {
		const doc = "promote-unrelated"
		solo := onBranch(createJob(doc, jsondoc.DocumentType), "solo")
		b.run(oplog.JobWriteReady, createJob(doc, jsondoc.DocumentType), setJob(doc, main, "m1"),
			solo, setJob(doc, "solo", "s1"), setJob(doc, "solo", "s2"))
		_, has, err := b.registry().Branch(context.Background(), doc, "solo")
		require.NoError(t, err)
		require.False(t, has, "a branch created by its own create job has no lineage")

		b.run(oplog.JobFailed, promoteJob(doc, "solo", main, map[string]int64{oplog.ScopeDocument: 1}))
		require.Len(t, b.readAll(stream(doc, oplog.ScopeGlobal, main)), 1, "a stale promote writes nothing")

		b.run(oplog.JobWriteReady, promoteJob(doc, "solo", main, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 1}))
		require.Equal(t, b.branchState(doc, "solo"), b.branchState(doc, main), "main equals solo in every scope")
		require.Equal(t, map[string]any{"s1": true, "s2": true}, b.globalOf(doc, main))
		g := b.readAll(stream(doc, oplog.ScopeGlobal, main))
		require.Len(t, g, 3)
		require.Equal(t, int64(1), g[1].Skip, "solo's first operation supersedes main's whole global scope")
		d := b.readAll(stream(doc, oplog.ScopeDocument, main))
		require.Len(t, d, 2)
		require.Equal(t, int64(1), d[1].Skip, "and solo's creation main's")
		require.Equal(t, "CREATE_DOCUMENT", d[1].Action.Type)
		_, has, err = b.registry().Branch(context.Background(), doc, main)
		require.NoError(t, err)
		require.False(t, has, "no entry is written for branches without lineage")

		// Back the other way, after main moves on.
		b.run(oplog.JobWriteReady, setJob(doc, main, "m2"))
		b.run(oplog.JobWriteReady, promoteJob(doc, main, "solo", map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 2}))
		require.Equal(t, b.branchState(doc, main), b.branchState(doc, "solo"))
		require.Equal(t, map[string]any{"s1": true, "s2": true, "m2": true}, b.globalOf(doc, "solo"))
	})

	t.Run("nothing shared in a scope", func(t *testing.T) {
		const doc = "promote-disjoint"
		b.run(oplog.JobWriteReady, createJob(doc, jsondoc.DocumentType), setJob(doc, main, "m1"),
			forkJob(doc, main, "draft", map[string]int64{oplog.ScopeGlobal: 0}),
			setJob(doc, main, "m2"), setJob(doc, "draft", "d1"))
		b.run(oplog.JobWriteReady, promoteJob(doc, "draft", main, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 2}))
		require.Equal(t, b.branchState(doc, "draft"), b.branchState(doc, main))
		require.Equal(t, map[string]any{"d1": true}, b.globalOf(doc, main))
		g := b.readAll(stream(doc, oplog.ScopeGlobal, main))
		require.Len(t, g, 3)
		require.Equal(t, int64(2), g[2].Skip)
		ref, _, err := b.registry().Branch(context.Background(), doc, "draft")
		require.NoError(t, err)
		require.Equal(t, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 1}, ref.OwnPoint)
		require.Equal(t, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 3}, ref.BasePoint)

		// The sync points now hold: the next promote is a fast-forward.
		b.run(oplog.JobWriteReady, setJob(doc, "draft", "d2"),
			promoteJob(doc, "draft", main, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 3}))
		g = b.readAll(stream(doc, oplog.ScopeGlobal, main))
		require.Len(t, g, 4)
		require.Zero(t, g[3].Skip)
		require.Equal(t, map[string]any{"d1": true, "d2": true}, b.globalOf(doc, main))
	})

	t.Run("the source lacks the scope", func(t *testing.T) {
		const doc = "promote-lacking"
		b.run(oplog.JobWriteReady, createJob(doc, jsondoc.DocumentType), setJob(doc, main, "m1"),
			forkJob(doc, main, "bare", map[string]int64{oplog.ScopeGlobal: 0}), setJob(doc, main, "m2"))
		before := b.readAll(stream(doc, oplog.ScopeGlobal, main))
		b.run(oplog.JobWriteReady, promoteJob(doc, "bare", main, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 2}))
		require.Equal(t, before, b.readAll(stream(doc, oplog.ScopeGlobal, main)), "main keeps the scope bare has no operation of")
		require.Equal(t, b.branchState(doc, "bare")[oplog.ScopeDocument], b.branchState(doc, main)[oplog.ScopeDocument])
	})

	t.Run("only the target moved, one shared operation", func(t *testing.T) {
		const doc = "promote-one-shared"
		b.run(oplog.JobWriteReady, createJob(doc, jsondoc.DocumentType), setJob(doc, main, "m1"),
			forkJob(doc, main, "draft", nil), setJob(doc, main, "m2"), setJob(doc, main, "m3"))
		b.run(oplog.JobWriteReady, promoteJob(doc, "draft", main, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 3}))
		require.Equal(t, b.branchState(doc, "draft"), b.branchState(doc, main))
		require.Equal(t, map[string]any{"m1": true}, b.globalOf(doc, main))
		g := b.readAll(stream(doc, oplog.ScopeGlobal, main))
		require.Len(t, g, 4)
		require.Equal(t, int64(3), g[3].Skip, "draft's one operation supersedes main's scope")
		require.Equal(t, g[0].Hash, g[3].Hash)

		b.run(oplog.JobWriteReady, setJob(doc, "draft", "d1"),
			promoteJob(doc, "draft", main, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 4}))
		require.Len(t, b.readAll(stream(doc, oplog.ScopeGlobal, main)), 5, "then a fast-forward")
		require.Equal(t, map[string]any{"m1": true, "d1": true}, b.globalOf(doc, main))
	})

	t.Run("onto itself", func(t *testing.T) {
		const doc = "promote-self"
		b.run(oplog.JobWriteReady, createJob(doc, jsondoc.DocumentType))
		p := promoteJob(doc, main, main, map[string]int64{oplog.ScopeDocument: 1})
		b.run(oplog.JobFailed, p)
		jr := b.waitResults([]string{p.JobID}, time.Second)[p.JobID]
		require.Equal(t, "InvalidPromote", lastError(jr))
	})
}
