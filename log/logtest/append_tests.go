package logtest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

func requireContiguous(t *testing.T, got []oplog.Operation, n int) {
	t.Helper()
	require.Len(t, got, n)
	for i, op := range got {
		require.Equal(t, int64(i), op.Index, "indexes are contiguous from 0")
	}
}

// requireAsStored checks that an append result carries the stored rows'
// ordinals and transaction ids.
func requireAsStored(t *testing.T, s oplog.Store, res oplog.AppendResult) {
	t.Helper()
	for _, op := range res.Operations {
		got, err := s.ReadStream(ctx(t), op.Stream(), op.Index, 1)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, got[0].OpID, op.OpID)
		require.Equal(t, got[0].Ordinal, op.Ordinal, "ordinal of %s index %d", op.Stream(), op.Index)
		require.Equal(t, got[0].TxID, op.TxID)
	}
}

func testAppendAndReadBack(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	r1 := appendOne(t, s, request(k, 0, 3))
	require.NoError(t, r1.Err)
	require.False(t, r1.Replayed)
	require.Len(t, r1.Operations, 3)
	r2 := appendOne(t, s, request(k, 3, 2))
	require.NoError(t, r2.Err)

	got := readAll(t, s, k)
	requireContiguous(t, got, 5)
	want := append(append([]oplog.Operation{}, r1.Operations...), r2.Operations...)
	for i := range got {
		require.Equal(t, want[i].OpID, got[i].OpID)
		require.Equal(t, want[i].Hash, got[i].Hash)
		require.Equal(t, want[i].Action.ID, got[i].Action.ID)
		require.JSONEq(t, string(want[i].Action.Input), string(got[i].Action.Input))
		require.Equal(t, want[i].Ordinal, got[i].Ordinal, "the result carries the stored ordinal")
		require.Equal(t, want[i].TxID, got[i].TxID, "the result carries the stored transaction id")
		require.Positive(t, got[i].Ordinal)
	}
	require.Less(t, got[2].TxID, got[3].TxID, "a later append has a later transaction id")

	from, err := s.ReadStream(ctx(t), k, 2, 2)
	require.NoError(t, err)
	require.Len(t, from, 2)
	require.Equal(t, int64(2), from[0].Index, "fromIndex is included")

	results, err := s.JobResults(ctx(t), []string{r1.Jobs[0].JobID, r2.Jobs[0].JobID, "no-such-job"})
	require.NoError(t, err)
	require.Len(t, results, 2)
	jr := results[r2.Jobs[0].JobID]
	require.Equal(t, oplog.JobWriteReady, jr.Status)
	require.Equal(t, []oplog.StreamRange{{Stream: k, FromIndex: 3, ToIndex: 4}}, jr.Streams)
	require.Equal(t, []oplog.Coordinate{{DocumentID: k.DocumentID, Scope: k.Scope, Branch: k.Branch, Index: 4}}, jr.Token.Coordinates)
}

func testRevisionBehindHead(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	require.NoError(t, appendOne(t, s, request(k, 0, 3)).Err)

	req := request(k, 1, 2)
	// Other opIds at taken positions: a conflict at a position.
	res := appendOne(t, s, req)
	var rm *oplog.RevisionMismatch
	require.ErrorAs(t, res.Err, &rm)
	require.Equal(t, k, rm.Stream)
	require.Equal(t, int64(1), rm.Expected)
	require.Equal(t, int64(3), rm.Actual)
	require.True(t, oplog.IsConflict(res.Err))

	// Expected revision ahead of the head.
	res = appendOne(t, s, request(k, 5, 1))
	require.ErrorAs(t, res.Err, &rm)
	require.Equal(t, int64(5), rm.Expected)
	require.Equal(t, int64(3), rm.Actual)

	requireContiguous(t, readAll(t, s, k), 3)
	results, err := s.JobResults(ctx(t), []string{req.Jobs[0].JobID})
	require.NoError(t, err)
	require.Empty(t, results, "a refused request writes no job result")
}

func testConditionFailedOthersCommit(t *testing.T, h Harness) {
	s := h.NewStore(t)
	guarded := stream(oplog.ScopeDocument)
	require.NoError(t, appendOne(t, s, request(guarded, 0, 2)).Err)

	a := stream(oplog.ScopeGlobal)
	b := stream(oplog.ScopeGlobal)
	stale := request(a, 0, 2, oplog.ConditionStream{Stream: guarded, Revision: 1})
	fresh := request(b, 0, 2, oplog.ConditionStream{Stream: guarded, Revision: 2})
	res, err := s.Append(ctx(t), []oplog.AppendRequest{stale, fresh})
	require.NoError(t, err)
	require.Len(t, res, 2)

	var cf *oplog.AppendConditionFailed
	require.ErrorAs(t, res[0].Err, &cf)
	require.Equal(t, guarded, cf.Stream)
	require.Equal(t, int64(1), cf.Recorded)
	require.Equal(t, int64(2), cf.Actual)
	require.Empty(t, readAll(t, s, a), "nothing of the failed request is written")

	require.NoError(t, res[1].Err)
	requireContiguous(t, readAll(t, s, b), 2)
	requireAsStored(t, s, res[1])
}

func testReplayBeforeCondition(t *testing.T, h Harness) {
	s := h.NewStore(t)
	guarded := stream(oplog.ScopeDocument)
	k := stream(oplog.ScopeGlobal)
	req := request(k, 0, 3, oplog.ConditionStream{Stream: guarded, Revision: 0})
	first := appendOne(t, s, req)
	require.NoError(t, first.Err)

	// The read-set stream grows after the first append.
	require.NoError(t, appendOne(t, s, request(guarded, 0, 1)).Err)

	again := appendOne(t, s, req)
	require.NoError(t, again.Err, "a re-delivered append is a replay, not a conflict")
	require.True(t, again.Replayed)
	require.Len(t, again.Operations, 3)
	for i := range again.Operations {
		require.Equal(t, first.Operations[i].OpID, again.Operations[i].OpID)
		require.Equal(t, first.Operations[i].Ordinal, again.Operations[i].Ordinal, "the stored rows are returned")
	}
	require.Len(t, again.Jobs, 1)
	require.Equal(t, oplog.JobWriteReady, again.Jobs[0].Status)
	requireContiguous(t, readAll(t, s, k), 3)

	// The same operations re-sent under another job id are still a replay
	// by position.
	byPosition := req
	byPosition.Jobs = []oplog.JobOutcome{{JobID: req.Jobs[0].JobID, Status: oplog.JobWriteReady}}
	res := appendOne(t, s, byPosition)
	require.NoError(t, res.Err)
	require.True(t, res.Replayed)
}

func testReplayOfSettledJob(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	req := request(k, 0, 2)
	require.NoError(t, appendOne(t, s, req).Err)
	require.NoError(t, appendOne(t, s, request(k, 2, 1)).Err)

	// The job is re-reduced against the new head: new positions, same job.
	again := req
	again.Streams = []oplog.StreamAppend{{Stream: k, ExpectedRevision: 3, Operations: ops(k, req.Jobs[0].JobID, 3, 2)}}
	res := appendOne(t, s, again)
	require.NoError(t, res.Err, "a job that already has a result is answered with it")
	require.True(t, res.Replayed)
	require.Len(t, res.Operations, 2)
	require.Equal(t, int64(0), res.Operations[0].Index, "the stored rows of the job, not the new ones")
	requireContiguous(t, readAll(t, s, k), 3)
}

func testFailedJobUnderGuard(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	require.NoError(t, appendOne(t, s, request(k, 0, 1)).Err)
	failed := func(expected int64) oplog.AppendRequest {
		return oplog.AppendRequest{
			DocumentID: k.DocumentID, DocumentType: "test/doc",
			Jobs: []oplog.JobOutcome{{JobID: newJobID(), Status: oplog.JobFailed, ErrorHistory: []oplog.ErrorInfo{
				{Name: "ReducerError", Message: "overdraft", Cause: &oplog.ErrorInfo{Name: "Balance", Message: "-5"}},
			}}},
			Streams: []oplog.StreamAppend{{Stream: k, ExpectedRevision: expected}},
		}
	}
	ok := failed(1)
	res := appendOne(t, s, ok)
	require.NoError(t, res.Err)
	require.Equal(t, oplog.JobFailed, res.Jobs[0].Status)

	stale := failed(0)
	res = appendOne(t, s, stale)
	var rm *oplog.RevisionMismatch
	require.ErrorAs(t, res.Err, &rm, "a failure is written under the same head guard")

	results, err := s.JobResults(ctx(t), []string{ok.Jobs[0].JobID, stale.Jobs[0].JobID})
	require.NoError(t, err)
	require.Len(t, results, 1)
	got := results[ok.Jobs[0].JobID]
	require.Equal(t, oplog.JobFailed, got.Status)
	require.Equal(t, ok.Jobs[0].ErrorHistory, got.ErrorHistory)
	require.Empty(t, got.Token.Coordinates)

	res = appendOne(t, s, ok)
	require.NoError(t, res.Err)
	require.True(t, res.Replayed, "a failed job is never settled again")
}

func testUniquenessRules(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	first := request(k, 0, 2)
	require.NoError(t, appendOne(t, s, first).Err)
	stored := readAll(t, s, k)

	// Same position, another opId: RevisionMismatch naming the position.
	other := request(k, 0, 1)
	res := appendOne(t, s, other)
	var rm *oplog.RevisionMismatch
	require.ErrorAs(t, res.Err, &rm)
	require.Equal(t, int64(0), rm.Index)
	var do *oplog.DuplicateOperation
	require.False(t, errors.As(res.Err, &do))

	// The same identity in another stream: DuplicateOperation.
	elsewhere := stream(oplog.ScopeGlobal)
	dup := request(elsewhere, 0, 1)
	dup.Streams[0].Operations[0].OpID = first.Streams[0].Operations[0].OpID
	res = appendOne(t, s, dup)
	require.ErrorAs(t, res.Err, &do)
	require.Equal(t, elsewhere, do.Stream)
	require.Equal(t, k, do.Existing)
	require.Equal(t, first.Streams[0].Operations[0].OpID, do.OpID)
	require.False(t, errors.As(res.Err, &rm), "never reported as each other")
	require.Empty(t, readAll(t, s, elsewhere))

	// The same opId again in its own stream at a new index (reshuffle) and
	// with a skip (undo): accepted.
	re := request(k, 2, 2)
	re.Streams[0].Operations[0].OpID = first.Streams[0].Operations[0].OpID
	re.Streams[0].Operations[1].OpID = first.Streams[0].Operations[1].OpID
	re.Streams[0].Operations[1].Skip = 1
	res = appendOne(t, s, re)
	require.NoError(t, res.Err)
	require.False(t, res.Replayed)

	after := readAll(t, s, k)
	requireContiguous(t, after, 4)
	require.Equal(t, stored, after[:2], "no stored row is overwritten")
	require.Equal(t, int64(1), after[3].Skip)
}

func testActionWithoutID(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	req := request(k, 0, 2)
	req.Streams[0].Operations[1].Action.ID = ""
	res := appendOne(t, s, req)
	var ir *oplog.InvalidRequest
	require.ErrorAs(t, res.Err, &ir)
	require.Contains(t, ir.Reason, "action has no id")
	require.Empty(t, readAll(t, s, k))
}

func testInvalidRequests(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	cases := map[string]func(r *oplog.AppendRequest){
		"index gap": func(r *oplog.AppendRequest) { r.Streams[0].Operations[1].Index = 5 },
		"unsettled job": func(r *oplog.AppendRequest) {
			r.Jobs = []oplog.JobOutcome{{JobID: "other", Status: oplog.JobWriteReady}}
		},
		"foreign stream": func(r *oplog.AppendRequest) { r.DocumentID = "someone-else" },
		"bad input JSON": func(r *oplog.AppendRequest) { r.Streams[0].Operations[0].Action.Input = []byte("{nope") },
		"skip before 0":  func(r *oplog.AppendRequest) { r.Streams[0].Operations[0].Skip = 1 },
	}
	for name, mutate := range cases {
		req := request(k, 0, 2)
		mutate(&req)
		res := appendOne(t, s, req)
		var ir *oplog.InvalidRequest
		require.ErrorAs(t, res.Err, &ir, name)
		require.Equal(t, oplog.NameInvalidRequest, oplog.ErrorName(res.Err), name)
	}
	require.Empty(t, readAll(t, s, k))
}

func testRaisingRequestFailsAlone(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	first := request(k, 0, 1)
	require.NoError(t, appendOne(t, s, first).Err)

	// b carries an identity stored elsewhere; c and d claim one identity
	// between them inside the batch; a and e are healthy.
	a, b, c, d, e := stream(oplog.ScopeGlobal), stream(oplog.ScopeGlobal), stream(oplog.ScopeGlobal), stream(oplog.ScopeGlobal), stream(oplog.ScopeGlobal)
	ra, rb, rc, rd, re := request(a, 0, 2), request(b, 0, 1), request(c, 0, 1), request(d, 0, 1), request(e, 0, 3)
	rb.Streams[0].Operations[0].OpID = first.Streams[0].Operations[0].OpID
	rd.Streams[0].Operations[0].OpID = rc.Streams[0].Operations[0].OpID
	res, err := s.Append(ctx(t), []oplog.AppendRequest{ra, rb, rc, rd, re})
	require.NoError(t, err)

	require.NoError(t, res[0].Err)
	var do *oplog.DuplicateOperation
	require.ErrorAs(t, res[1].Err, &do)
	require.Equal(t, k, do.Existing)
	require.NoError(t, res[2].Err, "the first claimant of an identity lands")
	require.ErrorAs(t, res[3].Err, &do)
	require.Equal(t, c, do.Existing)
	require.NoError(t, res[4].Err)

	requireContiguous(t, readAll(t, s, a), 2)
	require.Empty(t, readAll(t, s, b))
	requireContiguous(t, readAll(t, s, c), 1)
	require.Empty(t, readAll(t, s, d))
	requireContiguous(t, readAll(t, s, e), 3)
	for _, i := range []int{0, 2, 4} {
		requireAsStored(t, s, res[i])
	}
}

func testDependentRequestsInOneBatch(t *testing.T, h Harness) {
	s := h.NewStore(t)
	x, y := stream(oplog.ScopeGlobal), stream(oplog.ScopeGlobal)
	// Each reads the other's empty stream and writes its own: in any
	// serial order the second sees the first's write.
	rx := request(x, 0, 1, oplog.ConditionStream{Stream: y, Revision: 0})
	ry := request(y, 0, 1, oplog.ConditionStream{Stream: x, Revision: 0})
	res, err := s.Append(ctx(t), []oplog.AppendRequest{rx, ry})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	var cf *oplog.AppendConditionFailed
	require.ErrorAs(t, res[1].Err, &cf, "no write skew inside one batch")
	require.Len(t, readAll(t, s, x), 1)
	require.Empty(t, readAll(t, s, y))
}
