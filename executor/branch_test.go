package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

func forkJob(docID, from, to string, at map[string]int64) *record.Job {
	return &record.Job{JobID: uuid.NewString(), Kind: record.KindFork, DocumentID: docID, DocumentType: jsondoc.DocumentType,
		Branch: from, Actions: []oplog.Action{}, Fork: &record.Fork{Branch: to, At: at}}
}

func promoteJob(docID, from, onto string, expected map[string]int64) *record.Job {
	return &record.Job{JobID: uuid.NewString(), Kind: record.KindPromote, DocumentID: docID, DocumentType: jsondoc.DocumentType,
		Branch: from, Actions: []oplog.Action{}, Promote: &record.Promote{Onto: onto, ExpectedTip: expected}}
}

func onBranch(j *record.Job, branch string) *record.Job { j.Branch = branch; return j }

// branchState replays every scope of a document branch from the log, each
// hash checked, and returns the states by scope.
func (b *bundle) branchState(docID, branch string) map[string]json.RawMessage {
	b.t.Helper()
	out := map[string]json.RawMessage{}
	for _, scope := range []string{oplog.ScopeDocument, oplog.ScopeGlobal} {
		k := oplog.StreamKey{DocumentID: docID, Scope: scope, Branch: branch}
		ops := b.readAll(k)
		st, err := b.reg.ReplayStream(k, jsondoc.DocumentType, ops)
		require.NoError(b.t, err, "replay %s", k)
		raw, err := json.Marshal(st.State)
		require.NoError(b.t, err)
		out[scope] = raw
	}
	return out
}

func (b *bundle) registry() oplog.BranchRegistry { return b.store.(oplog.BranchRegistry) }

// A fork, writes on both branches, a promote with the right expected tip
// (the target then replays to the source's states, with the source's
// operations re-appended after a skip), a promote with a stale one (FAILED
// as BranchConflict, dead-lettered BRANCH_CONFLICT, nothing written), and a
// delete; every write-ready record of the branch jobs is an ordinary one.
func TestBranchJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.start(b.config())
	doc := "branch-doc"
	base := []*record.Job{createJob(doc, jsondoc.DocumentType), patchJob(doc, 1), patchJob(doc, 2)}
	b.submit(base...)
	b.waitResults(ids(base), 30*time.Second)

	fork := forkJob(doc, oplog.DefaultBranch, "draft", nil)
	onMain := patchJob(doc, 3)
	onDraft := onBranch(patchJob(doc, 30), "draft")
	b.submit(fork, onMain, onDraft)
	res := b.waitResults([]string{fork.JobID, onMain.JobID, onDraft.JobID}, 30*time.Second)
	for _, id := range []string{fork.JobID, onMain.JobID, onDraft.JobID} {
		require.Equal(t, oplog.JobWriteReady, res[id].Status, "%s: %+v", id, res[id].ErrorHistory)
	}
	draftGlobal := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: "draft"}
	draftOps := b.readAll(draftGlobal)
	mainOps := b.readAll(oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
	require.Len(t, draftOps, 3, "the two shared patches and the draft's own")
	require.Len(t, mainOps, 3)
	for i := range 2 {
		require.Equal(t, mainOps[i].Hash, draftOps[i].Hash, "the prefix is shared")
		require.Equal(t, mainOps[i].Action.ID, draftOps[i].Action.ID)
		require.Equal(t, fork.JobID, draftOps[i].JobID)
	}
	require.NotEqual(t, mainOps[2].Hash, draftOps[2].Hash)

	list, err := b.registry().Branches(context.Background(), doc)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "draft", list[0].Branch)
	require.Equal(t, oplog.DefaultBranch, list[0].Base)
	require.Equal(t, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 2}, list[0].ForkPoint)
	require.Equal(t, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 3}, list[0].Tips)
	require.Equal(t, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 3}, list[1].Tips)

	dl := b.reader(b.kenv.Names.DeadLetters)
	wr := b.reader(b.kenv.Names.WriteReady)
	// Stale: main is at global 3, not 2. Produced as raw JSON bytes with a
	// plain client, as any producer may.
	stale := promoteJob(doc, "draft", oplog.DefaultBranch, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 2})
	raw := `{"schema":"doclog.job.v1","jobId":"` + stale.JobID + `","kind":"promote","documentId":"` + doc +
		`","documentType":"doclog/json","branch":"draft","actions":[],"promote":{"onto":"main","expectedTip":{"document":1,"global":2}}}`
	b.produce(&kgo.Record{Topic: b.kenv.Names.Jobs, Key: []byte(doc), Value: []byte(raw),
		Headers: []kgo.RecordHeader{{Key: record.HeaderSchema, Value: []byte(record.SchemaJobV1)}}})
	jr := b.waitResults([]string{stale.JobID}, 30*time.Second)[stale.JobID]
	require.Equal(t, oplog.JobFailed, jr.Status)
	require.Equal(t, "BranchConflict", jr.ErrorHistory[len(jr.ErrorHistory)-1].Name)
	require.Contains(t, jr.ErrorHistory[len(jr.ErrorHistory)-1].Message, "not at the expected")
	letters := dl.deadLetters(30*time.Second, 1, func(d *record.DeadLetter) string { return d.Job.JobID })
	require.Equal(t, record.ErrBranchConflict, letters[stale.JobID].ErrorType)
	require.Len(t, b.readAll(oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}), 3, "nothing written")

	promote := promoteJob(doc, "draft", oplog.DefaultBranch, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 3})
	b.submit(promote)
	jr = b.waitResults([]string{promote.JobID}, 30*time.Second)[promote.JobID]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	require.Equal(t, b.branchState(doc, "draft"), b.branchState(doc, oplog.DefaultBranch), "main equals draft")
	after := b.readAll(oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
	require.Len(t, after, 4)
	require.Equal(t, int64(1), after[3].Skip, "main's own patch is superseded")
	require.Equal(t, draftOps[2].Hash, after[3].Hash)
	recs := b.writeReadies(wr, []string{promote.JobID, fork.JobID}, 30*time.Second)
	pw := recs[promote.JobID][0]
	require.Equal(t, oplog.DefaultBranch, pw.Branch)
	require.Equal(t, int64(1), pw.Operations[0].Skip)
	require.Equal(t, "draft", recs[fork.JobID][0].Branch)

	// Both go on; a second promote re-appends only what came after.
	more := onBranch(patchJob(doc, 31), "draft")
	b.submit(more)
	b.waitResults([]string{more.JobID}, 30*time.Second)
	again := promoteJob(doc, "draft", oplog.DefaultBranch, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 4})
	b.submit(again)
	jr = b.waitResults([]string{again.JobID}, 30*time.Second)[again.JobID]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	after = b.readAll(oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
	require.Len(t, after, 5, "a fast-forward of one operation")
	require.Zero(t, after[4].Skip)
	require.Equal(t, b.branchState(doc, "draft"), b.branchState(doc, oplog.DefaultBranch))

	// Delete; then the deleted branch refuses a fork of its name, another
	// delete and a write.
	del := &record.Job{JobID: uuid.NewString(), Kind: record.KindDeleteBranch, DocumentID: doc, DocumentType: jsondoc.DocumentType, Branch: "draft", Actions: []oplog.Action{}}
	b.submit(del)
	jr = b.waitResults([]string{del.JobID}, 30*time.Second)[del.JobID]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	ref, ok, err := b.registry().Branch(context.Background(), doc, "draft")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, ref.Deleted)
	require.Len(t, b.readAll(draftGlobal), 4, "a deleted branch's operations stay in the log")

	refork := forkJob(doc, oplog.DefaultBranch, "draft", nil)
	redelete := &record.Job{JobID: uuid.NewString(), Kind: record.KindDeleteBranch, DocumentID: doc, DocumentType: jsondoc.DocumentType, Branch: "draft", Actions: []oplog.Action{}}
	badPoint := forkJob(doc, oplog.DefaultBranch, "late", map[string]int64{oplog.ScopeGlobal: 99})
	writeDeleted := onBranch(patchJob(doc, 40), "draft")
	writeMain := patchJob(doc, 41)
	b.submit(refork, redelete, badPoint, writeDeleted, writeMain)
	res = b.waitResults([]string{refork.JobID, redelete.JobID, badPoint.JobID, writeDeleted.JobID, writeMain.JobID}, 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, res[writeMain.JobID].Status, "main goes on")
	require.Len(t, b.readAll(draftGlobal), 4, "nothing written to the deleted branch")
	for id, name := range map[string]string{refork.JobID: "BranchExists", redelete.JobID: "BranchNotFound", badPoint.JobID: "InvalidForkPoint",
		writeDeleted.JobID: "BranchNotFound"} {
		require.Equal(t, oplog.JobFailed, res[id].Status)
		require.Equal(t, name, res[id].ErrorHistory[len(res[id].ErrorHistory)-1].Name)
	}
}

// A fork at an index inside what a later promote superseded, promoted back:
// a replay of the target keeps superseded what the earlier promote's skip
// superseded, so the promote cannot start from the sync points (the state
// it would re-derive there is not the one a replay sees, and every hash it
// wrote would fail to replay); it promotes the whole scope instead, and the
// target then replays, every hash checked, to the source's states.
func TestPromoteOfAForkInsideASupersededRange(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.start(b.config())
	doc := "superseded-doc"
	run := func(jobs ...*record.Job) {
		t.Helper()
		b.submit(jobs...)
		res := b.waitResults(ids(jobs), 30*time.Second)
		for _, j := range jobs {
			require.Equal(t, oplog.JobWriteReady, res[j.JobID].Status, "%s %s: %+v", j.Kind, j.JobID, res[j.JobID].ErrorHistory)
		}
	}
	tip := func(global int64) map[string]int64 {
		return map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: global}
	}
	// Each patch adds a member of its own, so the state tells which
	// patches a replay kept.
	patchJob := func(doc string, n int) *record.Job {
		return mutateJob(doc, jsondoc.DocumentType, action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{fmt.Sprintf("p%d", n): n}))
	}
	run(createJob(doc, jsondoc.DocumentType), patchJob(doc, 1), patchJob(doc, 2))
	run(forkJob(doc, oplog.DefaultBranch, "b1", nil))
	run(onBranch(patchJob(doc, 10), "b1"), patchJob(doc, 3))
	// main: 1, 2, 3, then b1's 10 with skip 1 over main's 3.
	run(promoteJob(doc, "b1", oplog.DefaultBranch, tip(3)))
	main := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	require.Equal(t, int64(1), b.readAll(main)[3].Skip)
	// b2 forks main's first three: 1, 2 and the superseded 3.
	run(forkJob(doc, oplog.DefaultBranch, "b2", map[string]int64{oplog.ScopeGlobal: 3}))
	run(onBranch(patchJob(doc, 20), "b2"))
	run(promoteJob(doc, "b2", oplog.DefaultBranch, tip(4)))
	require.Equal(t, b.branchState(doc, "b2"), b.branchState(doc, oplog.DefaultBranch), "main replays, every hash checked, to b2's states")
	after := b.readAll(main)
	require.Len(t, after, 8, "b2's four operations re-appended after main's four")
	require.Equal(t, int64(4), after[4].Skip, "superseding the whole scope")
}
