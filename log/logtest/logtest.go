// Package logtest is the conformance suite every log.Store backend must pass:
// the append semantics (conditional append, idempotent replay,
// the two uniqueness rules, per-request failure inside a batch), the
// gap-safe tail, the read and keyframe methods, and the branch registry.
package logtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	oplog "github.com/doclog/doclog/log"
)

// Harness adapts a backend to the suite.
type Harness struct {
	// NewStore returns an empty, isolated store for one test.
	NewStore func(t *testing.T) oplog.Store
	// HoldTransaction writes op inside a transaction that stays open
	// until the returned commit function is called, so the suite can show
	// that the tail does not pass a row whose transaction is still open.
	HoldTransaction func(t *testing.T, s oplog.Store, op oplog.Operation) (commit func())
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"AppendAndReadBack", testAppendAndReadBack},
		{"RevisionBehindHead", testRevisionBehindHead},
		{"ConditionFailedOthersCommit", testConditionFailedOthersCommit},
		{"ReplayBeforeCondition", testReplayBeforeCondition},
		{"ReplayOfSettledJob", testReplayOfSettledJob},
		{"FailedJobUnderGuard", testFailedJobUnderGuard},
		{"UniquenessRules", testUniquenessRules},
		{"ActionWithoutID", testActionWithoutID},
		{"InvalidRequests", testInvalidRequests},
		{"RaisingRequestFailsAlone", testRaisingRequestFailsAlone},
		{"DependentRequestsInOneBatch", testDependentRequestsInOneBatch},
		{"MutualGuardsOneLands", testMutualGuardsOneLands},
		{"OppositeReadSetOrders", testOppositeReadSetOrders},
		{"ConcurrentOverlappingAppends", testConcurrentOverlappingAppends},
		{"TailPagesEverything", testTailPagesEverything},
		{"TailWaitsForOpenTransaction", testTailWaitsForOpenTransaction},
		{"TailSkipsNothingUnderLoad", testTailSkipsNothingUnderLoad},
		{"TailEndAndCursorBefore", testTailEndAndCursorBefore},
		{"TailEndWaitsForOpenTransaction", testTailEndWaitsForOpenTransaction},
		{"StreamLatestTimestamp", testStreamLatestTimestamp},
		{"Revisions", testRevisions},
		{"Heads", testHeads},
		{"ListDocumentsCodePointOrder", testListDocuments},
		{"Keyframes", testKeyframes},
		{"KeyframeInRequest", testKeyframeInRequest},
		{"BranchRegistry", testBranchRegistry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

var seq atomic.Int64

// stream returns a stream of a fresh document.
func stream(scope string) oplog.StreamKey {
	return oplog.StreamKey{DocumentID: fmt.Sprintf("doc-%d", seq.Add(1)), Scope: scope, Branch: oplog.DefaultBranch}
}

// ops makes n operations of one job for stream k starting at index from.
func ops(k oplog.StreamKey, jobID string, from int64, n int) []oplog.Operation {
	out := make([]oplog.Operation, n)
	for i := range out {
		idx := from + int64(i)
		out[i] = oplog.Operation{
			OpID:           fmt.Sprintf("%s-op-%d", jobID, i),
			JobID:          jobID,
			DocumentID:     k.DocumentID,
			DocumentType:   "test/doc",
			Scope:          k.Scope,
			Branch:         k.Branch,
			Index:          idx,
			Hash:           fmt.Sprintf("hash-%s-%d", k, idx),
			TimestampUtcMs: 1_700_000_000_000 + idx,
			Version:        1,
			Action: oplog.Action{
				ID: fmt.Sprintf("%s-action-%d", jobID, i), Type: "SET", Scope: k.Scope,
				TimestampUtcMs: 1_700_000_000_000 + idx, Input: []byte(`{"n":` + fmt.Sprint(idx) + `}`),
			},
		}
	}
	return out
}

var jobSeq atomic.Int64

func newJobID() string { return fmt.Sprintf("job-%d-%d", time.Now().UnixNano(), jobSeq.Add(1)) }

// request builds a one-stream request of one job with n operations.
func request(k oplog.StreamKey, expected int64, n int, cond ...oplog.ConditionStream) oplog.AppendRequest {
	job := newJobID()
	req := oplog.AppendRequest{
		DocumentID:   k.DocumentID,
		DocumentType: "test/doc",
		Jobs:         []oplog.JobOutcome{{JobID: job, Status: oplog.JobWriteReady}},
		Streams:      []oplog.StreamAppend{{Stream: k, ExpectedRevision: expected, Operations: ops(k, job, expected, n)}},
	}
	if len(cond) > 0 {
		req.Condition = &oplog.AppendCondition{Streams: cond}
	}
	return req
}

func appendOne(t *testing.T, s oplog.Store, req oplog.AppendRequest) oplog.AppendResult {
	t.Helper()
	res, err := s.Append(ctx(t), []oplog.AppendRequest{req})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if len(res) != 1 {
		t.Fatalf("append returned %d results for 1 request", len(res))
	}
	return res[0]
}

func readAll(t *testing.T, s oplog.Store, k oplog.StreamKey) []oplog.Operation {
	t.Helper()
	got, err := s.ReadStream(ctx(t), k, 0, 0)
	if err != nil {
		t.Fatalf("read stream %s: %v", k, err)
	}
	return got
}
