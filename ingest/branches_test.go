package ingest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// The branch routes produce fork, promote and delete-branch jobs keyed by
// their document, and refuse what the job contract refuses, producing
// nothing.
func TestBranchRoutesProduceBranchJobs(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic}, ingest.Deps{Producer: kb.producer})

	fork := request{method: "POST", path: "/v1/documents/doc-1/branches", body: `{"documentType": "doclog/json", "branch": "draft", "at": {"document": 1, "global": 2}}`}
	checkRequestSpec(t, fork)
	forkID, docID := accepted(t, do(t, h, fork))
	require.Equal(t, "doc-1", docID)
	promote := request{method: "POST", path: "/v1/documents/doc-1/branches/draft/promote", body: `{"documentType": "doclog/json", "onto": "main", "expectedTip": {"document": 1, "global": 3}}`}
	checkRequestSpec(t, promote)
	promoteID, _ := accepted(t, do(t, h, promote))
	del := request{method: "DELETE", path: "/v1/documents/doc-1/branches/draft?documentType=doclog/json"}
	checkRequestSpec(t, del)
	deleteID, _ := accepted(t, do(t, h, del))

	recs := kb.readRecords(t, 3)
	rec, got := decodeOne(t, recs, forkID)
	require.Equal(t, "doc-1", string(rec.Key))
	requireSameJob(t, &record.Job{JobID: forkID, Kind: record.KindFork, DocumentID: "doc-1", DocumentType: "doclog/json", Branch: oplog.DefaultBranch,
		Actions: []oplog.Action{}, SubmittedAtUtcMs: got.SubmittedAtUtcMs,
		Fork: &record.Fork{Branch: "draft", At: map[string]int64{"document": 1, "global": 2}}}, got)
	rec, got = decodeOne(t, recs, promoteID)
	require.Equal(t, "doc-1", string(rec.Key))
	requireSameJob(t, &record.Job{JobID: promoteID, Kind: record.KindPromote, DocumentID: "doc-1", DocumentType: "doclog/json", Branch: "draft",
		Actions: []oplog.Action{}, SubmittedAtUtcMs: got.SubmittedAtUtcMs,
		Promote: &record.Promote{Onto: "main", ExpectedTip: map[string]int64{"document": 1, "global": 3}}}, got)
	_, got = decodeOne(t, recs, deleteID)
	requireSameJob(t, &record.Job{JobID: deleteID, Kind: record.KindDeleteBranch, DocumentID: "doc-1", DocumentType: "doclog/json", Branch: "draft",
		Actions: []oplog.Action{}, SubmittedAtUtcMs: got.SubmittedAtUtcMs}, got)

	before := kb.endOffsets(t)
	for _, tc := range []struct {
		name                 string
		req                  request
		status               int
		code, field, message string
	}{
		{"fork without a branch", request{method: "POST", path: "/v1/documents/doc-1/branches", body: `{"documentType": "doclog/json"}`},
			http.StatusUnprocessableEntity, ingest.CodeInvalidField, "branch", "required"},
		{"fork at a negative point", request{method: "POST", path: "/v1/documents/doc-1/branches", body: `{"documentType": "doclog/json", "branch": "b", "at": {"global": -1}}`},
			http.StatusUnprocessableEntity, ingest.CodeInvalidField, "at", "negative"},
		{"fork at a null point", request{method: "POST", path: "/v1/documents/doc-1/branches", body: `{"documentType": "doclog/json", "branch": "b", "at": {"global": null}}`},
			http.StatusBadRequest, ingest.CodeInvalidField, "at", "null"},
		{"promote without expected tip", request{method: "POST", path: "/v1/documents/doc-1/branches/draft/promote", body: `{"documentType": "doclog/json", "onto": "main"}`},
			http.StatusUnprocessableEntity, ingest.CodeInvalidField, "expectedTip", "required"},
		{"delete main", request{method: "DELETE", path: "/v1/documents/doc-1/branches/main?documentType=doclog/json"},
			http.StatusUnprocessableEntity, ingest.CodeInvalidField, "branch", "main cannot be deleted"},
		{"delete with an unknown parameter", request{method: "DELETE", path: "/v1/documents/doc-1/branches/draft?documentType=doclog/json&force=1"},
			http.StatusBadRequest, ingest.CodeInvalidField, "force", "unknown query parameter"},
		{"unknown document type", request{method: "POST", path: "/v1/documents/doc-1/branches", body: `{"documentType": "no/such", "branch": "b"}`},
			http.StatusUnprocessableEntity, ingest.CodeUnknownDocumentType, "documentType", "not a registered document type"},
	} {
		requireRefused(t, do(t, h, tc.req), tc.status, tc.code, tc.field, tc.message)
	}
	require.Equal(t, before, kb.endOffsets(t), "a refused request produces nothing")
}
