package ctlcli

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// docs branch fork, list, promote and delete against a running executor
// and projectors: exit 0 for a job that ends WRITE_READY, 3 for one that
// ends FAILED (a stale expected tip), 2 for bad usage, 1 for a document
// without branches.
func TestDocsBranchCommands(t *testing.T) {
	t.Parallel()
	p := startPipeline(t)
	doc := "cli-branch-" + uuid.NewString()[:8]
	patch := func(branch string, v int) *record.Job {
		return &record.Job{JobID: uuid.NewString(), Kind: record.KindMutate, DocumentID: doc, DocumentType: "doclog/json", Branch: branch,
			Actions: []oplog.Action{{ID: uuid.NewString(), Type: "MERGE_PATCH", Scope: oplog.ScopeGlobal, Input: json.RawMessage(`{"v":` + string(rune('0'+v)) + `}`)}}}
	}
	create := &record.Job{JobID: uuid.NewString(), Kind: record.KindCreate, DocumentID: doc, DocumentType: "doclog/json", Actions: []oplog.Action{}}
	for _, j := range []*record.Job{create, patch("main", 1)} {
		p.submit(t, j)
		require.Equal(t, oplog.JobWriteReady, p.await(t, j.JobID).Status)
	}
	run := func(args ...string) (int, string, string) { return ctl(t, append(args, p.args...)...) }

	code, out, errOut := run("docs", "branch", "fork", doc, "draft", "--type", "doclog/json", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `"WRITE_READY"`)
	for _, j := range []*record.Job{patch("main", 2), patch("draft", 3)} {
		p.submit(t, j)
		require.Equal(t, oplog.JobWriteReady, p.await(t, j.JobID).Status)
	}

	code, out, errOut = run("docs", "branch", "list", doc, "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var list []oplog.BranchInfo
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list, 2)
	require.Equal(t, "draft", list[0].Branch)
	require.Equal(t, "main", list[0].Base)
	require.Equal(t, map[string]int64{"document": 1, "global": 1}, list[0].ForkPoint)
	require.Equal(t, map[string]int64{"document": 1, "global": 2}, list[1].Tips)
	code, out, _ = run("docs", "branch", "list", doc)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "document=1,global=2")

	code, out, _ = run("docs", "branch", "promote", doc, "draft", "--onto", "main", "--expected-tip", "document=1,global=1", "--type", "doclog/json")
	require.Equal(t, exitProblems, code, "a stale expected tip fails the job")
	require.Contains(t, out, "BranchConflict")
	code, _, errOut = run("docs", "branch", "promote", doc, "draft", "--onto", "main", "--expected-tip", "document=1,global=2", "--type", "doclog/json")
	require.Equal(t, exitOK, code, errOut)
	revs, err := p.store.Revisions(t.Context(), doc, "main")
	require.NoError(t, err)
	require.Equal(t, int64(3), revs.Revision["global"], "draft's own patch re-appended after main's, superseding it")

	code, _, errOut = run("docs", "branch", "delete", doc, "draft", "--type", "doclog/json")
	require.Equal(t, exitOK, code, errOut)
	code, out, _ = run("docs", "branch", "list", doc, "-o", "json")
	require.Equal(t, exitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list, 1)
	code, out, _ = run("docs", "branch", "list", doc, "--all", "-o", "json")
	require.Equal(t, exitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list, 2)
	require.True(t, list[0].Deleted)

	for _, args := range [][]string{
		{"docs", "branch", "promote", doc, "draft", "--type", "doclog/json"},
		{"docs", "branch", "fork", doc, "b2", "--type", "doclog/json", "--at", "global"},
		{"docs", "branch", "fork", doc, "b2"},
		{"docs", "branch", "delete", doc, "main", "--type", "doclog/json"},
	} {
		code, _, _ = run(args...)
		require.Equal(t, exitUsage, code, "%v", args)
	}
	code, _, _ = run("docs", "branch", "list", "no-such-document")
	require.Equal(t, exitFailed, code)
}
