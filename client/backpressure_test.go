package client_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/client"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/record"
)

// A real ingest refusing for backlog: its jobs topic of one partition has a
// consumer group that stopped at offset 0. A client allowed one attempt
// gets the 429 executor_lag with its Retry-After; a client with retries
// waits it out and is accepted once the group commits past the backlog. Every
// acknowledged job is on the topic.
func TestClientWaitsOutBackpressure(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(stackKafka)
	name := "client-backpressure-" + uuid.NewString()[:8]
	_, err := adm.CreateTopic(ctx, 1, -1, nil, name)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), name) })
	commit := func(at int64) {
		t.Helper()
		offsets := kadm.Offsets{}
		offsets.Add(kadm.Offset{Topic: name, Partition: 0, At: at})
		resp, err := adm.CommitOffsets(ctx, name, offsets)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	commit(0)

	w, err := kafka.NewBacklogWatcher(kafka.BacklogConfig{Client: stackKafka, Group: name, Topic: name, Interval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { require.NoError(t, w.Stop(context.Background())) })
	deps := stackIngestDeps
	deps.Backlog = w
	const bound = 2
	srv, err := ingest.NewServer(ingest.Config{Addr: "127.0.0.1:0", JobsTopic: name, BearerTokens: []string{writeToken},
		MaxExecutorLagRecords: bound, MaxExecutorLag: -1}, deps)
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(func() { require.NoError(t, srv.Stop(context.Background())) })
	require.Eventually(t, func() bool { return !w.Backlog().MeasuredAt.IsZero() }, 30*time.Second, 50*time.Millisecond)

	newClient := func(attempts int) *client.Client {
		c, err := client.New(client.Config{IngestURL: "http://" + srv.Addr().String(), ReadstoreURL: readstoreURL,
			WriteToken: writeToken, MaxAttempts: attempts})
		require.NoError(t, err)
		return c
	}
	job := client.Job{DocumentID: uuid.NewString(), DocumentType: "doclog/json",
		Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"n": 1}}}}
	acked := map[string]bool{}
	once := newClient(1)
	var refused *client.APIError
	for i := 0; refused == nil; i++ {
		require.Less(t, i, 20, "no submit was refused")
		sub, err := once.SubmitJob(ctx, job)
		if errors.As(err, &refused) {
			break
		}
		require.NoError(t, err)
		acked[sub.JobID] = true
	}
	require.LessOrEqual(t, len(acked), bound+1)
	require.Equal(t, http.StatusTooManyRequests, refused.StatusCode)
	require.Equal(t, client.CodeExecutorLag, refused.Code)
	// No drain rate is measured (nothing consumes): the excess drains in
	// under the floor, the watcher's interval, at the rate assumed.
	require.Equal(t, 100*time.Millisecond, refused.RetryAfter)
	require.Contains(t, refused.Message, "past the bound of 2 jobs; nothing was produced: retry after 100ms")

	// The group catches up a moment after the next submit is first
	// refused; the client's retry after the Retry-After is accepted.
	drained := make(chan error, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		ends, err := adm.ListEndOffsets(ctx, name)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			offsets := kadm.Offsets{}
			o, _ := ends.Lookup(name, 0)
			offsets.Add(kadm.Offset{Topic: name, Partition: 0, At: o.Offset})
			_, err = adm.CommitOffsets(ctx, name, offsets)
		}
		drained <- err
	}()
	start := time.Now()
	sub, err := newClient(50).SubmitJob(ctx, job)
	require.NoError(t, <-drained)
	require.NoError(t, err, "accepted once the backlog drained")
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond, "the client waited out the Retry-Afters until the backlog drained")
	acked[sub.JobID] = true

	cl, err := kafka.NewClient(kafka.Config{Seeds: []string{os.Getenv("TEST_KAFKA_SEEDS")}}, nil,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{name: {0: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer cl.Close()
	for len(acked) > 0 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "acknowledged jobs missing from the topic: %v", acked)
		fs.EachRecord(func(r *kgo.Record) {
			j, err := record.DecodeJob(r)
			require.NoError(t, err)
			require.True(t, acked[j.JobID], "job %s on the topic was not acknowledged", j.JobID)
			delete(acked, j.JobID)
		})
	}
}
