package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/client"
)

// SubmitJobs against the running stack: each job gets its own outcome, the
// accepted ones run in order on their document, a refused one names its
// place, and a key submitted again is the same job.
func TestSubmitJobsAnswersEachJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := stackClient(t)
	doc, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json"})
	require.NoError(t, err)
	patch := func(k string, v int) []client.Action {
		return []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{k: v}}}
	}
	key := "client-test-" + uuid.NewString()
	jobs := []client.BatchJob{
		{Job: client.Job{DocumentID: doc.DocumentID, DocumentType: "doclog/json", Actions: patch("a", 1)}, IdempotencyKey: key},
		{Job: client.Job{DocumentID: doc.DocumentID, DocumentType: "doclog/json", Actions: []client.Action{{Type: "NOPE", Scope: "global"}}}},
		{Job: client.Job{DocumentID: doc.DocumentID, DocumentType: "doclog/json", Actions: patch("a", 2)}},
	}
	res, err := c.SubmitJobs(ctx, jobs)
	require.NoError(t, err)
	require.Len(t, res, 3)
	require.NoError(t, res[0].Err)
	require.Equal(t, key, res[0].Accepted.IdempotencyKey)
	require.NoError(t, res[2].Err)
	require.NotEmpty(t, res[2].Accepted.IdempotencyKey, "a key was generated for the job")
	require.Nil(t, res[1].Accepted)
	e := client.AsAPIError(res[1].Err)
	require.NotNil(t, e, "%v", res[1].Err)
	require.Equal(t, http.StatusUnprocessableEntity, e.StatusCode)
	require.Equal(t, client.CodeUnknownAction, e.Code)
	require.Equal(t, "jobs[1].actions[0].type", e.Field)

	// The same key again is the same job.
	again, err := c.SubmitJobs(ctx, jobs[:1])
	require.NoError(t, err)
	require.Equal(t, res[0].Accepted.JobID, again[0].Accepted.JobID)

	st, err := c.WaitJob(ctx, res[2].Accepted.JobID)
	require.NoError(t, err)
	ops, err := c.Operations(ctx, doc.DocumentID, client.OperationQuery{}, client.WithConsistencyToken(st.ConsistencyToken))
	require.NoError(t, err)
	require.Len(t, ops.Operations, 2, "the two accepted jobs, once each")
	require.Equal(t, res[0].Accepted.JobID, ops.Operations[0].JobID)
	require.Equal(t, res[2].Accepted.JobID, ops.Operations[1].JobID)
}

// A job the broker did not acknowledge (503 in its result) is sent again
// alone, under the same key; one refused for good is not.
func TestSubmitJobsRetriesTheUnavailableJobsOnly(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	answers := []string{
		`{"results": [{"status": 202, "accepted": {"jobId": "j0", "documentId": "d", "status": "PENDING", "statusUrl": "/v1/jobs/j0"}},
			{"status": 503, "error": {"code": "broker_unavailable", "message": "the broker did not acknowledge job j1"}},
			{"status": 422, "error": {"code": "invalid_field", "message": "jobs[2].documentId: required", "field": "jobs[2].documentId"}}]}`,
		`{"results": [{"status": 202, "accepted": {"jobId": "j1", "documentId": "d", "status": "PENDING", "statusUrl": "/v1/jobs/j1"}}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(bodies)
		bodies = append(bodies, string(raw))
		mu.Unlock()
		if r.URL.Path != "/v1/jobs:batch" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answers[min(n, len(answers)-1)])
	}))
	defer srv.Close()
	c, err := client.New(client.Config{IngestURL: srv.URL, BaseDelay: time.Millisecond})
	require.NoError(t, err)
	job := client.Job{DocumentID: "d", DocumentType: "doclog/json", Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global"}}}
	res, err := c.SubmitJobs(context.Background(), []client.BatchJob{{Job: job}, {Job: job, IdempotencyKey: "k1"}, {Job: client.Job{DocumentType: "doclog/json"}}})
	require.NoError(t, err)
	require.Len(t, bodies, 2)
	second := mustJobs(t, bodies[1])
	require.Len(t, second, 1, "only the unavailable job is sent again")
	require.Equal(t, "k1", second[0]["idempotencyKey"])
	require.Equal(t, "j0", res[0].Accepted.JobID)
	require.Equal(t, "j1", res[1].Accepted.JobID)
	require.Equal(t, "k1", res[1].Accepted.IdempotencyKey)
	e := client.AsAPIError(res[2].Err)
	require.NotNil(t, e)
	require.Equal(t, "jobs[2].documentId", e.Field)
	require.Equal(t, []any{}, mustJobs(t, bodies[0])[2]["actions"], "an absent list is sent empty, for the server to name")
}

func mustJobs(t *testing.T, body string) []map[string]any {
	t.Helper()
	var b struct {
		Jobs []map[string]any `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &b))
	return b.Jobs
}
