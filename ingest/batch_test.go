package ingest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// batchAnswer is the body of a 200 to POST /v1/jobs:batch.
type batchAnswer struct {
	Results []struct {
		Status   int `json:"status"`
		Accepted *struct {
			JobID      string `json:"jobId"`
			DocumentID string `json:"documentId"`
			Status     string `json:"status"`
			StatusURL  string `json:"statusUrl"`
		} `json:"accepted"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	} `json:"results"`
}

func batchOf(t *testing.T, res response) batchAnswer {
	t.Helper()
	require.Equal(t, http.StatusOK, res.status, "body: %s", res.body)
	var b batchAnswer
	require.NoError(t, json.Unmarshal(res.body, &b), "body: %s", res.body)
	return b
}

func TestBatchProducesEachValidJobAndAnswersEach(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic}, ingest.Deps{Producer: kb.producer})
	patch := func(n int) string {
		return fmt.Sprintf(`{"type": "MERGE_PATCH", "scope": "global", "input": {"k": %d}}`, n)
	}
	req := request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [
		{"documentId": "doc-1", "documentType": "doclog/json", "idempotencyKey": "key-1", "actions": [` + patch(1) + `], "meta": {"n": 1}},
		{"documentId": "doc-1", "documentType": "doclog/json", "actions": [{"type": "NOPE", "scope": "global", "input": {}}]},
		{"documentId": "doc-2", "documentType": "doclog/json", "actions": [` + patch(2) + `], "queueHint": null},
		{"documentId": "doc-1", "documentType": "doclog/json", "actions": [` + patch(3) + `], "colour": "red"},
		{"documentId": "doc-1", "documentType": "doclog/json", "actions": [` + patch(4) + `, ` + patch(5) + `]},
		{"documentId": "doc-3", "documentType": "doclog/json", "idempotencyKey": "", "actions": [` + patch(6) + `]},
		"not an object"
	]}`}
	checkRequestSpec(t, request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [
		{"documentId": "doc-1", "documentType": "doclog/json", "idempotencyKey": "key-1", "actions": [` + patch(1) + `]}]}`})
	b := batchOf(t, do(t, h, req))
	require.Len(t, b.Results, 7)

	// Each refused job is answered as POST /v1/jobs would answer it, its
	// field under its place in the batch.
	for _, want := range []struct {
		i      int
		status int
		code   string
		field  string
	}{
		{1, 422, ingest.CodeUnknownAction, "jobs[1].actions[0].type"},
		{2, 400, ingest.CodeMalformedJSON, "jobs[2].queueHint"},
		{3, 400, ingest.CodeMalformedJSON, "jobs[3].colour"},
		{5, 400, ingest.CodeInvalidField, "jobs[5].idempotencyKey"},
		{6, 400, ingest.CodeMalformedJSON, "jobs[6]"},
	} {
		r := b.Results[want.i]
		require.Equal(t, want.status, r.Status, "job %d", want.i)
		require.Nil(t, r.Accepted, "job %d", want.i)
		require.NotNil(t, r.Error, "job %d", want.i)
		require.Equal(t, want.code, r.Error.Code, "job %d: %s", want.i, r.Error.Message)
		require.Equal(t, want.field, r.Error.Field, "job %d", want.i)
		require.True(t, strings.HasPrefix(r.Error.Message, want.field+": "), "the message leads with the field: %s", r.Error.Message)
	}

	// The two valid ones were produced, keyed by document; the keyed one
	// has the job id of its key, as with the header.
	ids := map[int]string{}
	for _, i := range []int{0, 4} {
		r := b.Results[i]
		require.Equal(t, http.StatusAccepted, r.Status, "job %d", i)
		require.Nil(t, r.Error)
		require.Equal(t, "doc-1", r.Accepted.DocumentID)
		require.Equal(t, "PENDING", r.Accepted.Status)
		require.Equal(t, "/v1/jobs/"+r.Accepted.JobID, r.Accepted.StatusURL)
		ids[i] = r.Accepted.JobID
	}
	require.Equal(t, model.JobIDFromIdempotencyKey("key-1"), ids[0])
	recs := kb.readRecords(t, 2)
	require.Equal(t, int64(2), kb.endOffsets(t), "only the valid jobs were produced")
	// Jobs of one document are produced in request order: one partition,
	// the first job at the lower offset.
	first, job0 := decodeOne(t, recs, ids[0])
	second, job4 := decodeOne(t, recs, ids[4])
	require.Equal(t, "doc-1", string(first.Key))
	require.Equal(t, first.Partition, second.Partition)
	require.Less(t, first.Offset, second.Offset)
	now := job0.SubmittedAtUtcMs
	requireSameJob(t, &record.Job{
		JobID: ids[0], Kind: record.KindMutate, DocumentID: "doc-1", DocumentType: "doclog/json",
		Actions: []oplog.Action{{ID: ingest.ActionID(ids[0], 0), Type: "MERGE_PATCH", Scope: "global", TimestampUtcMs: now, Input: json.RawMessage(`{"k":1}`)}},
		Meta:    json.RawMessage(`{"n":1}`), SubmittedAtUtcMs: now,
	}, job0)
	require.Len(t, job4.Actions, 2)
	require.Equal(t, ingest.ActionID(ids[4], 1), job4.Actions[1].ID)
}

func TestBatchRefusedAsAWholeProducesNothing(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic, MaxBatchJobs: 2, MaxBatchBytes: 600, MaxBodyBytes: 200},
		ingest.Deps{Producer: kb.producer})
	job := `{"documentId": "d", "documentType": "doclog/json", "actions": [{"type": "MERGE_PATCH", "scope": "global", "input": {}}]}`
	for _, tc := range []struct {
		name   string
		req    request
		status int
		code   string
		field  string
	}{
		{"a key for the request", request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [` + job + `]}`, header: map[string]string{"Idempotency-Key": "k"}},
			400, ingest.CodeInvalidField, "Idempotency-Key"},
		{"no jobs", request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": []}`}, 422, ingest.CodeInvalidField, "jobs"},
		{"jobs left out", request{method: "POST", path: "/v1/jobs:batch", body: `{}`}, 422, ingest.CodeInvalidField, "jobs"},
		{"jobs null", request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": null}`}, 400, ingest.CodeMalformedJSON, "jobs"},
		{"too many jobs", request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [` + job + `,` + job + `,` + job + `]}`}, 413, ingest.CodeTooManyJobs, "jobs"},
		{"too large", request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [` + job + `,` + strings.Repeat(" ", 600) + job + `]}`}, 413, ingest.CodeBodyTooLarge, ""},
		{"an unknown member", request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [` + job + `], "more": 1}`}, 400, ingest.CodeMalformedJSON, "more"},
		{"not JSON", request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [`}, 400, ingest.CodeMalformedJSON, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireRefused(t, do(t, h, tc.req), tc.status, tc.code, tc.field, "")
		})
	}
	// A job larger than one POST /v1/jobs may send is refused alone.
	big := `{"documentId": "d", "documentType": "doclog/json", "actions": [{"type": "MERGE_PATCH", "scope": "global", "input": {"k": "` + strings.Repeat("x", 200) + `"}}]}`
	b := batchOf(t, do(t, h, request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [` + big + `]}`}))
	require.Len(t, b.Results, 1)
	require.Equal(t, 413, b.Results[0].Status)
	require.Equal(t, ingest.CodeBodyTooLarge, b.Results[0].Error.Code)
	require.Equal(t, "jobs[0]", b.Results[0].Error.Field)
	require.Zero(t, kb.endOffsets(t), "nothing was produced")
}

func TestBatchAnswersEachJobTheBrokerRefused(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ingest.Config{}, ingest.Deps{Producer: failingProducer{}})
	job := `{"documentId": "d%d", "documentType": "doclog/json", "actions": [{"type": "MERGE_PATCH", "scope": "global", "input": {}}]}`
	b := batchOf(t, do(t, h, request{method: "POST", path: "/v1/jobs:batch",
		body: `{"jobs": [` + fmt.Sprintf(job, 1) + `,` + fmt.Sprintf(job, 2) + `]}`}))
	require.Len(t, b.Results, 2)
	for _, r := range b.Results {
		require.Equal(t, http.StatusServiceUnavailable, r.Status)
		require.Equal(t, ingest.CodeBrokerUnavailable, r.Error.Code)
		require.Contains(t, r.Error.Message, "retry with the same Idempotency-Key")
	}
}
