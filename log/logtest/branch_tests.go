package logtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

// testBranchRegistry: a request's registry entry commits with it, and only
// when it lands; Branches lists every branch with operations or an entry,
// with its tips. Skipped only for a backend that keeps no registry, which
// the suite then checks refuses requests carrying an entry.
func testBranchRegistry(t *testing.T, h Harness) {
	s := h.NewStore(t)
	reg, ok := s.(oplog.BranchRegistry)
	mainK := stream(oplog.ScopeGlobal)
	doc := mainK.DocumentID
	first := appendOne(t, s, request(mainK, 0, 3))
	require.NoError(t, first.Err)

	feature := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: "feature"}
	fork := request(feature, 0, 2)
	fork.Branch = &oplog.BranchRef{DocumentID: doc, Branch: "feature", Base: oplog.DefaultBranch,
		ForkPoint: map[string]int64{oplog.ScopeGlobal: 2}, BasePoint: map[string]int64{oplog.ScopeGlobal: 2},
		OwnPoint: map[string]int64{oplog.ScopeGlobal: 2}, JobID: fork.Jobs[0].JobID}
	res := appendOne(t, s, fork)
	if !ok {
		var inv *oplog.InvalidRequest
		require.ErrorAs(t, res.Err, &inv, "a backend without a registry refuses an entry")
		return
	}
	require.NoError(t, res.Err)

	got, found, err := reg.Branch(ctx(t), doc, "feature")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, oplog.DefaultBranch, got.Base)
	require.Equal(t, map[string]int64{oplog.ScopeGlobal: 2}, got.ForkPoint)
	require.Equal(t, fork.Jobs[0].JobID, got.JobID)
	require.False(t, got.Deleted)
	_, found, err = reg.Branch(ctx(t), doc, oplog.DefaultBranch)
	require.NoError(t, err)
	require.False(t, found, "main has no entry")

	// A request refused by its guard writes no entry.
	stale := request(feature, 0, 1)
	stale.Branch = &oplog.BranchRef{DocumentID: doc, Branch: "feature", Deleted: true}
	res = appendOne(t, s, stale)
	var rm *oplog.RevisionMismatch
	require.ErrorAs(t, res.Err, &rm)
	got, _, err = reg.Branch(ctx(t), doc, "feature")
	require.NoError(t, err)
	require.False(t, got.Deleted, "the refused request's entry was not written")

	// An entry of another document is invalid.
	other := request(feature, 2, 1)
	other.Branch = &oplog.BranchRef{DocumentID: "another", Branch: "feature"}
	var inv *oplog.InvalidRequest
	require.ErrorAs(t, appendOne(t, s, other).Err, &inv)

	// A replaced entry (a deletion) lands with its request.
	del := oplog.AppendRequest{DocumentID: doc, Jobs: []oplog.JobOutcome{{JobID: newJobID(), Status: oplog.JobWriteReady}},
		Streams:   []oplog.StreamAppend{{Stream: feature, ExpectedRevision: 2}},
		Condition: &oplog.AppendCondition{Streams: []oplog.ConditionStream{{Stream: feature, Revision: 2}}}}
	entry := got
	entry.Deleted, entry.JobID = true, del.Jobs[0].JobID
	del.Branch = &entry
	require.NoError(t, appendOne(t, s, del).Err)

	list, err := reg.Branches(ctx(t), doc)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "feature", list[0].Branch, "code-point order")
	require.True(t, list[0].Deleted)
	require.Equal(t, map[string]int64{oplog.ScopeGlobal: 2}, list[0].Tips)
	require.Equal(t, oplog.DefaultBranch, list[1].Branch)
	require.Equal(t, map[string]int64{oplog.ScopeGlobal: 3}, list[1].Tips)
	require.Empty(t, list[1].Base)

	none, err := reg.Branches(ctx(t), "no-such-document")
	require.NoError(t, err)
	require.Empty(t, none)
}
