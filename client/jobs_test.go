package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/client"
)

const jobID = "0198c0de-0000-7000-8000-000000000001"

func TestWaitJobPollsUntilAResult(t *testing.T) {
	t.Parallel()
	pending := reply{status: 200, body: `{"jobId":"` + jobID + `","status":"PENDING"}`}
	s := newScripted(t, pending, unavailable("0"), pending, reply{status: 200, body: `{"jobId":"` + jobID + `","status":"WRITE_READY","documentId":"d-1",
"consistencyToken":"eyJjb29yZGluYXRlcyI6W119","coordinates":[{"documentId":"d-1","scope":"global","branch":"main","index":3}],
"streams":[{"stream":{"documentId":"d-1","scope":"global","branch":"main"},"fromIndex":0,"toIndex":3}],"completedAt":"2026-12-01T18:00:00Z"}`})
	c := newTestClient(t, s.srv.URL, client.Config{WriteToken: "w", ReadToken: "r", JobPollWait: 20 * time.Millisecond})
	st, err := c.WaitJob(context.Background(), jobID)
	require.NoError(t, err)
	require.Equal(t, client.StatusWriteReady, st.Status)
	require.True(t, st.Done())
	require.Equal(t, "eyJjb29yZGluYXRlcyI6W119", st.ConsistencyToken)
	require.Equal(t, []client.Coordinate{{DocumentID: "d-1", Scope: "global", Branch: "main", Index: 3}}, st.Coordinates)
	require.Equal(t, int64(3), st.Streams[0].ToIndex)
	require.NotNil(t, st.CompletedAt)
	got := s.requests()
	require.Len(t, got, 4, "two PENDING polls and a 503 before the result")
	for _, r := range got {
		require.Equal(t, "/v1/jobs/"+jobID, r.URL.Path)
		require.Equal(t, "20ms", r.URL.Query().Get("wait"))
		require.Equal(t, "Bearer r", r.Header.Get("Authorization"), "job status carries the read token")
	}
}

// A load job's status carries what its placement did, per stream.
func TestGetJobOfALoad(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{status: 200, body: `{"jobId":"` + jobID + `","status":"WRITE_READY","documentId":"d-1",
"consistencyToken":"eyJjb29yZGluYXRlcyI6W119","coordinates":[{"documentId":"d-1","scope":"global","branch":"main","index":3}],
"streams":[{"stream":{"documentId":"d-1","scope":"global","branch":"main"},"fromIndex":2,"toIndex":3}],
"load":{"streams":[{"stream":{"documentId":"d-1","scope":"global","branch":"main"},"stored":1,"replayed":2,"superseded":0,"reshuffled":1,"skip":1}]},
"completedAt":"2026-12-01T18:00:00Z"}`})
	c := newTestClient(t, s.srv.URL, client.Config{WriteToken: "w", ReadToken: "r"})
	st, err := c.GetJob(context.Background(), jobID)
	require.NoError(t, err)
	require.Equal(t, &client.LoadResult{Streams: []client.LoadStream{{
		Stream: client.StreamKey{DocumentID: "d-1", Scope: "global", Branch: "main"},
		Stored: 1, Replayed: 2, Reshuffled: 1, Skip: 1,
	}}}, st.Load)
}

func TestWaitJobFailed(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{status: 200, body: `{"jobId":"` + jobID + `","status":"FAILED","documentId":"d-1",
"errorHistory":[{"name":"ReducerError","message":"apply MERGE_PATCH","cause":{"name":"InvalidInput","message":"not an object"}}]}`})
	c := newTestClient(t, s.srv.URL, client.Config{})
	st, err := c.WaitJob(context.Background(), jobID)
	var failed *client.JobFailedError
	require.True(t, errors.As(err, &failed))
	require.Equal(t, jobID, failed.JobID)
	require.Equal(t, client.StatusFailed, st.Status)
	require.Equal(t, "job "+jobID+" failed: ReducerError: apply MERGE_PATCH: InvalidInput: not an object", err.Error())
}

func TestWaitJobEndsWithTheContext(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{status: 200, body: `{"jobId":"` + jobID + `","status":"PENDING"}`})
	c := newTestClient(t, s.srv.URL, client.Config{JobPollWait: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	st, err := c.WaitJob(ctx, jobID)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, client.StatusPending, st.Status, "the last status seen")
}

func TestWaitJobNotFound(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{status: 404, body: `{"error":{"code":"job_not_found","message":"id: \"nope\" is not a job id","field":"id","requestId":"x"}}`})
	c := newTestClient(t, s.srv.URL, client.Config{})
	_, err := c.WaitJob(context.Background(), "nope")
	require.True(t, client.IsNotFound(err))
	require.Len(t, s.requests(), 1)
}
