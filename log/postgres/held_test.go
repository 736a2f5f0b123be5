package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
)

// HeldBefore finds the given operation ids a stream holds below an index,
// with every index each is held at (a moved operation keeps its id), and
// none of another stream's.
func TestHeldBefore(t *testing.T) {
	t.Parallel()
	store := postgres.New(newPool(t, true))
	ctx := context.Background()
	k := oplog.StreamKey{DocumentID: "doc-held", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	other := k
	other.Branch = "other"
	op := func(s oplog.StreamKey, id string, index, skip int64) oplog.Operation {
		return oplog.Operation{OpID: id, JobID: "job-held", DocumentID: s.DocumentID, DocumentType: "t", Scope: s.Scope, Branch: s.Branch,
			Index: index, Skip: skip, Hash: "h", Version: 1,
			Action: oplog.Action{ID: "a-" + id, Type: "T", Scope: s.Scope, Input: json.RawMessage(`{}`)}}
	}
	res, err := store.Append(ctx, []oplog.AppendRequest{{DocumentID: k.DocumentID, DocumentType: "t",
		Jobs: []oplog.JobOutcome{{JobID: "job-held", Status: oplog.JobWriteReady}},
		Streams: []oplog.StreamAppend{
			{Stream: k, Operations: []oplog.Operation{op(k, "op-a", 0, 0), op(k, "op-b", 1, 0), op(k, "op-c", 2, 0), op(k, "op-a", 3, 2)}},
			{Stream: other, Operations: []oplog.Operation{op(other, "op-x", 0, 0)}},
		}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	got, err := store.HeldBefore(ctx, k, 3, []string{"op-a", "op-c", "op-x", "op-none"})
	require.NoError(t, err)
	require.Equal(t, map[string][]int64{"op-a": {0}, "op-c": {2}}, got)
	got, err = store.HeldBefore(ctx, k, 4, []string{"op-a"})
	require.NoError(t, err)
	require.Equal(t, map[string][]int64{"op-a": {0, 3}}, got)
	got, err = store.HeldBefore(ctx, k, 0, []string{"op-a"})
	require.NoError(t, err)
	require.Empty(t, got)
}
