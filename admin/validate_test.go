package admin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/modeltest"
)

type bundle struct {
	store *postgres.Store
	reg   *model.Registry
	doc   *modeltest.Doc
}

// setup stores a doclog/json document with a create and n merge patches,
// appended as one job through the real Postgres store.
func setup(t *testing.T, n int) bundle {
	t.Helper()
	patches := make([]map[string]any, n)
	for i := range patches {
		patches[i] = map[string]any{"n": i, "title": "t"}
	}
	return setupWith(t, patches)
}

// setupWith is setup with the merge patches given.
func setupWith(t *testing.T, patches []map[string]any) bundle {
	t.Helper()
	ctx := context.Background()
	store, err := postgres.Open(ctx, testenv.PostgresSchema(t))
	require.NoError(t, err)
	t.Cleanup(store.Close)
	_, err = store.Migrate(ctx)
	require.NoError(t, err)
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	d := modeltest.Created(t, reg, "doclog/json")
	d.JobID = "0193a000-0000-7000-8000-000000000001"
	for _, p := range patches {
		d.Must(oplog.ScopeGlobal, "MERGE_PATCH", p)
	}
	for scope := range d.Ops {
		for i := range d.Ops[scope] {
			d.Ops[scope][i].JobID = d.JobID
		}
	}
	req := oplog.AppendRequest{
		DocumentID: d.ID, DocumentType: d.Type,
		Jobs: []oplog.JobOutcome{{JobID: d.JobID, Status: oplog.JobWriteReady}},
	}
	for _, scope := range []string{oplog.ScopeDocument, oplog.ScopeGlobal} {
		req.Streams = append(req.Streams, oplog.StreamAppend{Stream: d.Stream(scope).Stream, Operations: d.Ops[scope]})
	}
	res, err := store.Append(ctx, []oplog.AppendRequest{req})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	return bundle{store: store, reg: reg, doc: d}
}

func TestValidateConsistentDocument(t *testing.T) {
	t.Parallel()
	b := setup(t, 25)
	ctx := context.Background()
	_, err := admin.RebuildKeyframes(ctx, b.store, b.reg, b.doc.ID, oplog.DefaultBranch, 10)
	require.NoError(t, err)

	rep, err := admin.ValidateDocument(ctx, b.store, b.reg, nil, b.doc.ID, oplog.DefaultBranch)
	require.NoError(t, err)
	require.True(t, rep.Consistent, "issues: %+v", rep.Issues)
	require.Len(t, rep.Streams, 2)
	require.Equal(t, oplog.ScopeDocument, rep.Streams[0].Stream.Scope, "the document scope first")
	require.Equal(t, int64(25), rep.Streams[1].Revision)
	require.Equal(t, 2, rep.Streams[1].Keyframes, "keyframes at indexes 9 and 19")
	require.Equal(t, b.doc.Stream(oplog.ScopeGlobal).Hash, rep.Streams[1].Hash)

	_, err = admin.ValidateDocument(ctx, b.store, b.reg, nil, "no-such-document", oplog.DefaultBranch)
	require.ErrorIs(t, err, admin.ErrDocumentNotFound)
}

func TestValidateReportsCorruptedKeyframe(t *testing.T) {
	t.Parallel()
	b := setup(t, 25)
	ctx := context.Background()
	global := b.doc.Stream(oplog.ScopeGlobal).Stream
	ops, err := b.store.ReadStream(ctx, global, 0, 0)
	require.NoError(t, err)

	// Three kinds of damage: a state that does not hash to its hash, a
	// self-consistent keyframe of the wrong state, and one past the head.
	state, _ := json.Marshal(map[string]any{"n": 999})
	h, _, err := model.Hash(map[string]any{"n": 999.0})
	require.NoError(t, err)
	for _, kf := range []oplog.Keyframe{
		{Stream: global, DocumentType: "doclog/json", Index: 9, Version: 1, State: state, Hash: ops[9].Hash},
		{Stream: global, DocumentType: "doclog/json", Index: 19, Version: 1, State: state, Hash: h},
		{Stream: global, DocumentType: "doclog/json", Index: 40, Version: 1, State: state, Hash: h},
	} {
		require.NoError(t, b.store.PutKeyframe(ctx, kf))
	}
	rep, err := admin.ValidateDocument(ctx, b.store, b.reg, nil, b.doc.ID, oplog.DefaultBranch)
	require.NoError(t, err)
	require.False(t, rep.Consistent)
	var at []int64
	for _, is := range rep.Issues {
		require.Equal(t, admin.IssueKeyframe, is.Kind, "%+v", is)
		require.Equal(t, global, is.Stream)
		at = append(at, is.Index)
	}
	require.ElementsMatch(t, []int64{9, 19, 40}, at)

	// Rebuilding replaces them with keyframes that validate.
	rebuilt, err := admin.RebuildKeyframes(ctx, b.store, b.reg, b.doc.ID, oplog.DefaultBranch, 10)
	require.NoError(t, err)
	require.Equal(t, admin.KeyframeRebuild{Stream: global, Deleted: 3, Written: 2}, rebuilt[1])
	rep, err = admin.ValidateDocument(ctx, b.store, b.reg, nil, b.doc.ID, oplog.DefaultBranch)
	require.NoError(t, err)
	require.True(t, rep.Consistent, "issues: %+v", rep.Issues)
}

// A large state's keyframes are rebuilt where the executor writes them:
// spaced by its size (model.KeyframeDue), not by the interval alone.
func TestRebuildKeyframesSpacesALargeState(t *testing.T) {
	t.Parallel()
	patches := []map[string]any{{"body": strings.Repeat("x", model.KeyframeBytes+1000)}}
	for i := range 11 {
		patches = append(patches, map[string]any{"n": i})
	}
	b := setupWith(t, patches)
	ctx := context.Background()
	global := b.doc.Stream(oplog.ScopeGlobal)
	require.Equal(t, int64(4), model.KeyframeSpacing(2, global.Size), "a state over 128 KiB doubles the spacing")

	rebuilt, err := admin.RebuildKeyframes(ctx, b.store, b.reg, b.doc.ID, oplog.DefaultBranch, 2)
	require.NoError(t, err)
	require.Equal(t, admin.KeyframeRebuild{Stream: global.Stream, Written: 3}, rebuilt[1], "revisions 4, 8 and 12, not every 2")
	kfs, err := b.store.ListKeyframes(ctx, global.Stream)
	require.NoError(t, err)
	var at []int64
	for _, kf := range kfs {
		at = append(at, kf.Index)
	}
	require.Equal(t, []int64{3, 7, 11}, at)
	rep, err := admin.ValidateDocument(ctx, b.store, b.reg, nil, b.doc.ID, oplog.DefaultBranch)
	require.NoError(t, err)
	require.True(t, rep.Consistent, "issues: %+v", rep.Issues)
}

func TestValidateReportsHashMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	ctx := context.Background()
	global := b.doc.Stream(oplog.ScopeGlobal).Stream
	// An operation whose stored hash disagrees with its state, appended
	// straight to the log (the store does not recompute hashes).
	job := "0193a000-0000-7000-8000-000000000002"
	bad := oplog.Operation{
		OpID: model.OpID(job, 0), JobID: job, DocumentID: global.DocumentID, DocumentType: "doclog/json",
		Scope: global.Scope, Branch: global.Branch, Index: 3, Version: 1, Hash: "not-the-hash", TimestampUtcMs: 1_800_000_000_000,
		Action: oplog.Action{ID: "x", Type: "MERGE_PATCH", Scope: global.Scope, Input: json.RawMessage(`{"a":1}`)},
	}
	res, err := b.store.Append(ctx, []oplog.AppendRequest{{
		DocumentID: global.DocumentID, Jobs: []oplog.JobOutcome{{JobID: job, Status: oplog.JobWriteReady}},
		Streams: []oplog.StreamAppend{{Stream: global, ExpectedRevision: 3, Operations: []oplog.Operation{bad}}},
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	rep, err := admin.ValidateDocument(ctx, b.store, b.reg, nil, b.doc.ID, oplog.DefaultBranch)
	require.NoError(t, err)
	require.False(t, rep.Consistent)
	require.Len(t, rep.Issues, 1)
	require.Equal(t, admin.IssueHash, rep.Issues[0].Kind)
	require.Equal(t, int64(3), rep.Issues[0].Index)
	require.Contains(t, rep.Issues[0].Message, "not-the-hash")

	_, err = admin.RebuildKeyframes(ctx, b.store, b.reg, b.doc.ID, oplog.DefaultBranch, 2)
	require.ErrorContains(t, err, "keyframes left as they are")
}
