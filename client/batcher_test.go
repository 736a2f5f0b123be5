package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/client"
)

// batchServer is a fake ingest API's POST /v1/jobs:batch: it records each
// request's jobs, answers each with answer (202 with the key as the job id
// when answer is nil), and holds each request until release is closed or
// receives.
type batchServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	batches [][]map[string]any
	release chan struct{}
	answer  func(n, i int, job map[string]any) string // request n's job i's result as JSON; "" is 202
}

func newBatchServer(t *testing.T) *batchServer {
	t.Helper()
	s := &batchServer{release: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs:batch" {
			http.NotFound(w, r)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var b struct {
			Jobs []map[string]any `json:"jobs"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		n := len(s.batches)
		s.batches = append(s.batches, b.Jobs)
		answer := s.answer
		s.mu.Unlock()
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		}
		results := make([]json.RawMessage, len(b.Jobs))
		for i, j := range b.Jobs {
			res := ""
			if answer != nil {
				res = answer(n, i, j)
			}
			if res == "" {
				res = fmt.Sprintf(`{"status": 202, "accepted": {"jobId": %q, "documentId": %q, "status": "PENDING", "statusUrl": "/v1/jobs/x"}}`,
					j["idempotencyKey"], j["documentId"])
			}
			results[i] = json.RawMessage(res)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *batchServer) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n []int
	for _, b := range s.batches {
		n = append(n, len(b))
	}
	return n
}

func (s *batchServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.batches)
}

func patchJob(doc string) client.Job {
	return client.Job{DocumentID: doc, DocumentType: "doclog/json",
		Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"n": 1}}}}
}

// While every request slot is taken, the jobs submitted meanwhile wait and
// then leave together; each caller gets its own job's acceptance.
func TestBatcherGathersTheJobsSubmittedWhileRequestsAreOut(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	c, err := client.New(client.Config{IngestURL: s.srv.URL})
	require.NoError(t, err)
	b, err := c.NewBatcher(client.BatcherConfig{MaxInFlight: 1, MaxJobs: 8})
	require.NoError(t, err)
	defer b.Close()

	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		acc, err := b.Submit(ctx, patchJob("d0"), client.WithIdempotencyKey("k0"))
		if err == nil && (acc.JobID != "k0" || acc.IdempotencyKey != "k0") {
			err = fmt.Errorf("job k0 answered as %+v", acc)
		}
		first <- err
	}()
	require.Eventually(t, func() bool { return s.requests() == 1 }, 5*time.Second, time.Millisecond, "the first job leaves at once, alone")

	const waiting = 20
	var wg sync.WaitGroup
	var started atomic.Int32
	errs := make(chan error, waiting)
	for i := range waiting {
		wg.Go(func() {
			started.Add(1)
			key := fmt.Sprintf("k%d", i+1)
			acc, err := b.Submit(ctx, patchJob(fmt.Sprintf("d%d", i+1)), client.WithIdempotencyKey(key))
			if err == nil && (acc.JobID != key || acc.IdempotencyKey != key || acc.DocumentID != fmt.Sprintf("d%d", i+1)) {
				err = fmt.Errorf("job %s answered as %+v", key, acc)
			}
			errs <- err
		})
	}
	// Nothing more leaves while the one slot is taken.
	require.Eventually(t, func() bool { return started.Load() == waiting }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, 1, s.requests())
	close(s.release)
	require.NoError(t, <-first)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	sizes := s.sizes()
	require.Equal(t, 1, sizes[0])
	total := 0
	for _, n := range sizes[1:] {
		require.LessOrEqual(t, n, 8, "MaxJobs bounds a request")
		total += n
	}
	require.Equal(t, waiting, total, "every waiting job was sent once")
	require.Len(t, sizes, 1+3, "the 20 waiting jobs left in requests of 8, 8 and 4")
}

// A refusal for good reaches its caller at once, named as POST /v1/jobs
// would name it; a job answered 503 goes again, under the same key, in a
// later request, while the others of its request are accepted at once.
func TestBatcherSettlesEachJobOnItsOwn(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	close(s.release)
	s.answer = func(n, i int, job map[string]any) string {
		switch {
		case job["documentId"] == "bad":
			return fmt.Sprintf(`{"status": 422, "error": {"code": "unknown_action", "message": "jobs[%d].actions[0].type: NOPE is not an action of doclog/json", "field": "jobs[%d].actions[0].type"}}`, i, i)
		case job["documentId"] == "flaky" && n == 1:
			return `{"status": 503, "error": {"code": "broker_unavailable", "message": "the broker did not acknowledge the job"}}`
		}
		return ""
	}
	c, err := client.New(client.Config{IngestURL: s.srv.URL, BaseDelay: time.Millisecond})
	require.NoError(t, err)
	b, err := c.NewBatcher(client.BatcherConfig{MaxInFlight: 1})
	require.NoError(t, err)
	defer b.Close()

	// Fill the first request with all three: hold it until they queued.
	hold := make(chan struct{})
	s.mu.Lock()
	answer := s.answer
	s.answer = func(n, i int, job map[string]any) string {
		if n == 0 {
			<-hold
		}
		return answer(n, i, job)
	}
	s.mu.Unlock()
	ctx := context.Background()
	type outcome struct {
		acc *client.Accepted
		err error
	}
	out := map[string]chan outcome{"good": make(chan outcome, 1), "bad": make(chan outcome, 1), "flaky": make(chan outcome, 1)}
	go func() {
		acc, err := b.Submit(ctx, patchJob("good"), client.WithIdempotencyKey("good"))
		out["good"] <- outcome{acc, err}
	}()
	require.Eventually(t, func() bool { return s.requests() == 1 }, 5*time.Second, time.Millisecond)
	var started atomic.Int32
	for _, doc := range []string{"bad", "flaky"} {
		go func() {
			started.Add(1)
			acc, err := b.Submit(ctx, patchJob(doc), client.WithIdempotencyKey(doc))
			out[doc] <- outcome{acc, err}
		}()
	}
	require.Eventually(t, func() bool { return started.Load() == 2 }, 5*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	close(hold) // the first request (good alone) is answered; bad and flaky leave together

	good := <-out["good"]
	require.NoError(t, good.err)
	require.Equal(t, "good", good.acc.JobID)
	bad := <-out["bad"]
	require.Nil(t, bad.acc)
	e := client.AsAPIError(bad.err)
	require.NotNil(t, e, "%v", bad.err)
	require.Equal(t, http.StatusUnprocessableEntity, e.StatusCode)
	require.Equal(t, "actions[0].type", e.Field, "named as the job alone would be")
	require.Equal(t, "actions[0].type: NOPE is not an action of doclog/json", e.Message)
	flaky := <-out["flaky"]
	require.NoError(t, flaky.err)
	require.Equal(t, "flaky", flaky.acc.JobID)

	sizes := s.sizes()
	require.Len(t, sizes, 3, "good alone, then bad and flaky, then flaky again")
	require.Equal(t, []int{1, 2, 1}, sizes)
	s.mu.Lock()
	require.Equal(t, "flaky", s.batches[2][0]["idempotencyKey"], "the retry carries the same key")
	s.mu.Unlock()
}

// A caller that gives up before its job was sent returns at once and the
// job is never sent; a request whose callers all gave up is cancelled.
// After Close, Submit refuses, and Close waits for what was submitted.
func TestBatcherCancellationAndClose(t *testing.T) {
	t.Parallel()
	s := newBatchServer(t)
	c, err := client.New(client.Config{IngestURL: s.srv.URL, MaxAttempts: 1})
	require.NoError(t, err)
	b, err := c.NewBatcher(client.BatcherConfig{MaxInFlight: 1})
	require.NoError(t, err)

	held, giveUp := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := b.Submit(held, patchJob("held"))
		first <- err
	}()
	require.Eventually(t, func() bool { return s.requests() == 1 }, 5*time.Second, time.Millisecond)

	queued, cancelQueued := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := b.Submit(queued, patchJob("queued"))
		second <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancelQueued()
	require.ErrorIs(t, <-second, context.Canceled)

	// The held request's only caller gives up: the request is cancelled,
	// its slot freed, and the queued job (whose caller left) is not sent.
	giveUp()
	require.ErrorIs(t, <-first, context.Canceled)

	var accepted, started atomic.Int32
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			started.Add(1)
			if acc, err := b.Submit(context.Background(), patchJob(fmt.Sprintf("late%d", i))); err == nil && acc.JobID != "" {
				accepted.Add(1)
			}
		})
	}
	require.Eventually(t, func() bool { return s.requests() >= 2 && started.Load() == 5 }, 5*time.Second, time.Millisecond, "the freed slot is used")
	time.Sleep(100 * time.Millisecond) // the other four queued behind it
	closed := make(chan struct{})
	go func() {
		b.Close()
		close(closed)
	}()
	require.Eventually(t, func() bool {
		// Until Close has begun this job queues and its caller gives up,
		// so it is never sent either.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := b.Submit(ctx, patchJob("after"))
		return errors.Is(err, client.ErrBatcherClosed)
	}, 5*time.Second, time.Millisecond, "a closing batcher takes no more jobs")
	select {
	case <-closed:
		t.Fatal("Close returned with a request out and jobs queued")
	case <-time.After(50 * time.Millisecond):
	}
	close(s.release)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	wg.Wait()
	require.EqualValues(t, 5, accepted.Load(), "Close sent the queued jobs and waited for their answers")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, batch := range s.batches {
		for _, j := range batch {
			require.NotEqual(t, "queued", j["documentId"], "a job whose caller left before it was sent is never sent")
			require.NotEqual(t, "after", j["documentId"])
		}
	}
}

func TestBatcherConfigValidation(t *testing.T) {
	t.Parallel()
	c, err := client.New(client.Config{IngestURL: "http://127.0.0.1:1"})
	require.NoError(t, err)
	for _, tc := range []struct {
		cfg  client.BatcherConfig
		want string
	}{
		{client.BatcherConfig{MaxJobs: -1}, "MaxJobs must be at least 1, got -1"},
		{client.BatcherConfig{MaxBytes: -5}, "MaxBytes must be at least 1, got -5"},
		{client.BatcherConfig{MaxInFlight: -2}, "MaxInFlight must be at least 1, got -2"},
	} {
		_, err := c.NewBatcher(tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
	d := client.BatcherConfig{}.WithDefaults()
	require.Equal(t, client.BatcherConfig{MaxJobs: 100, MaxBytes: 4 << 20, MaxInFlight: 4}, d)
	require.NoError(t, d.Validate())
}

// countingTransport counts the requests to each path.
type countingTransport struct {
	mu    sync.Mutex
	paths map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths[r.URL.Path]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// Against the running stack: documents submitting one job at a time each,
// all at once, through one Batcher. Every job is accepted, each document's
// operations are its jobs in submission order, and the jobs went in fewer
// requests than there were jobs.
func TestBatcherAgainstTheStack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := &countingTransport{paths: map[string]int{}}
	c, err := client.New(client.Config{IngestURL: ingestURL, ReadstoreURL: readstoreURL, WriteToken: writeToken, ReadToken: readToken,
		HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	b, err := c.NewBatcher(client.BatcherConfig{MaxInFlight: 2})
	require.NoError(t, err)
	defer b.Close()

	const docs, perDoc = 16, 8
	ids := make([]string, docs)
	for d := range ids {
		acc, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json"})
		require.NoError(t, err)
		ids[d] = acc.DocumentID
	}
	jobs := make([][]string, docs)
	var wg sync.WaitGroup
	errs := make(chan error, docs)
	for d := range docs {
		wg.Go(func() {
			for n := range perDoc {
				acc, err := b.Submit(ctx, client.Job{DocumentID: ids[d], DocumentType: "doclog/json",
					Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"n": n}}}})
				if err != nil {
					errs <- fmt.Errorf("document %d, job %d: %w", d, n, err)
					return
				}
				jobs[d] = append(jobs[d], acc.JobID)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	tr.mu.Lock()
	requests := tr.paths["/v1/jobs:batch"]
	tr.mu.Unlock()
	require.Less(t, requests, docs*perDoc, "concurrent jobs shared requests")

	for d := range docs {
		st, err := c.WaitJob(ctx, jobs[d][perDoc-1])
		require.NoError(t, err)
		ops, err := c.Operations(ctx, ids[d], client.OperationQuery{}, client.WithConsistencyToken(st.ConsistencyToken))
		require.NoError(t, err)
		require.Len(t, ops.Operations, perDoc, "document %d", d)
		for n, op := range ops.Operations {
			require.Equal(t, jobs[d][n], op.JobID, "document %d: the jobs in the order submitted", d)
		}
	}
}
