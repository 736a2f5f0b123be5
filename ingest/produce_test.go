package ingest_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/ingest"
)

const fakeTopic = "doclog.jobs"

// fakeBroker is an in-process cluster with the jobs topic and a producer
// built as ingest builds it.
func fakeBroker(t *testing.T) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, fakeTopic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(append(ingest.ProducerOptions(), kgo.SeedBrokers(c.ListenAddrs()...))...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return c, cl
}

// stored counts the records the fake cluster holds on the jobs topic.
func stored(c *kfake.Cluster) int64 {
	var n int64
	for _, p := range c.PartitionInfos(fakeTopic) {
		n += p.HighWatermark
	}
	return n
}

var mutateBody = `{"documentId": "doc-k", "documentType": "doclog/ledger", "actions": [{"type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": 1}}]}`

func TestBrokerUnavailableIs503(t *testing.T) {
	t.Parallel()
	c, cl := fakeBroker(t)
	h := newHandler(t, ingest.Config{ProduceTimeout: time.Second}, ingest.Deps{Producer: cl})

	accepted(t, do(t, h, request{method: "POST", path: "/v1/jobs", body: mutateBody}))
	require.Equal(t, int64(1), stored(c))
	require.Equal(t, http.StatusOK, do(t, h, request{method: "GET", path: "/readyz"}).status)

	c.Close()
	start := time.Now()
	res := do(t, h, request{method: "POST", path: "/v1/jobs", body: mutateBody})
	require.Equal(t, http.StatusServiceUnavailable, res.status, "body: %s", res.body)
	e := res.apiError(t)
	require.Equal(t, ingest.CodeBrokerUnavailable, e.Error.Code)
	require.Contains(t, e.Error.Message, "retry with the same Idempotency-Key")
	require.Equal(t, "1", res.header.Get("Retry-After"))
	require.Less(t, time.Since(start), 10*time.Second, "bounded by the produce timeout")

	ready := do(t, h, request{method: "GET", path: "/readyz"})
	require.Equal(t, http.StatusServiceUnavailable, ready.status)
	require.Equal(t, "not ready", ready.json(t)["status"])
}

func TestBrokerRefusalIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	c, cl := fakeBroker(t)
	// A topic whose records may not exceed 300 bytes: the broker refuses
	// the job's record, which ingest had no reason to refuse itself.
	const small = "doclog.jobs.small"
	require.NoError(t, c.CreateTopic(small, 1, map[string]string{"max.message.bytes": "300"}))
	h := newHandler(t, ingest.Config{JobsTopic: small, ProduceTimeout: 5 * time.Second}, ingest.Deps{Producer: cl})

	res := do(t, h, request{method: "POST", path: "/v1/jobs", body: mutateBody})
	require.Equal(t, http.StatusRequestEntityTooLarge, res.status, "body: %s", res.body)
	require.Equal(t, ingest.CodeRecordTooLarge, res.apiError(t).Error.Code)
	var n int64
	for _, p := range c.PartitionInfos(small) {
		n += p.HighWatermark
	}
	require.Equal(t, int64(0), n, "nothing was acknowledged")
}

// slowProducer acknowledges after a delay, like a broker under load, and
// tells when a produce has begun.
type slowProducer struct {
	ingest.Producer
	delay   time.Duration
	started chan struct{}
	once    *sync.Once
}

func (p slowProducer) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	p.once.Do(func() { close(p.started) })
	time.Sleep(p.delay)
	p.Producer.Produce(ctx, r, promise)
}

func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	c, cl := fakeBroker(t)
	srv, err := ingest.NewServer(ingest.Config{Addr: "127.0.0.1:0", JobsTopic: fakeTopic},
		ingest.Deps{Producer: cl, Results: noResults{}, Registry: registry(t)})
	require.NoError(t, err)
	require.NoError(t, srv.Stop(context.Background()), "stopping a server never started is harmless")

	slow := slowProducer{Producer: cl, delay: 300 * time.Millisecond, started: make(chan struct{}), once: &sync.Once{}}
	reader := &countingReader{ResultReader: noResults{}}
	srv, err = ingest.NewServer(ingest.Config{Addr: "127.0.0.1:0", JobsTopic: fakeTopic, BearerTokens: []string{"s3cret"}, PollInterval: 10 * time.Millisecond},
		ingest.Deps{Producer: slow, Results: reader, Registry: registry(t)})
	require.NoError(t, err)
	require.Nil(t, srv.Addr())
	require.NoError(t, srv.Start(testCtx(t)))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	require.Error(t, srv.Start(testCtx(t)), "a server starts once")
	base := "http://" + srv.Addr().String()
	client := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	get := func(path string) *http.Response {
		req, err := http.NewRequest("GET", base+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := client.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	require.Equal(t, http.StatusOK, get("/healthz").StatusCode)
	require.Equal(t, http.StatusOK, get("/readyz").StatusCode)
	spec := get("/openapi.yaml")
	require.Equal(t, http.StatusOK, spec.StatusCode)
	require.Equal(t, "application/yaml", spec.Header.Get("Content-Type"))

	// A submit in flight and a long poll when Stop is called: the submit
	// finishes (the broker acknowledged, the client hears 202), the long
	// poll is answered at once with the job's current status.
	type result struct {
		status int
		err    error
	}
	submit := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/v1/jobs", stringsReader(mutateBody))
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			submit <- result{err: err}
			return
		}
		_ = resp.Body.Close()
		submit <- result{status: resp.StatusCode}
	}()
	poll := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("GET", base+"/v1/jobs/"+newV7UUID()+"?wait=30s", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := client.Do(req)
		if err != nil {
			poll <- result{err: err}
			return
		}
		_ = resp.Body.Close()
		poll <- result{status: resp.StatusCode}
	}()
	// Stop once the submit is with the producer and the poll with the poller.
	<-slow.started
	require.Eventually(t, func() bool { return reader.calls.Load() > 0 }, 10*time.Second, time.Millisecond)
	start := time.Now()
	require.NoError(t, srv.Stop(context.Background()))
	require.Less(t, time.Since(start), 10*time.Second)
	require.NoError(t, srv.Stop(context.Background()), "stopping twice is harmless")

	s := <-submit
	require.NoError(t, s.err)
	require.Equal(t, http.StatusAccepted, s.status, "a submit in flight completes")
	p := <-poll
	require.NoError(t, p.err)
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, int64(1), stored(c))

	_, err = client.Get(base + "/healthz")
	require.Error(t, err, "a stopped server does not answer")
}

func TestLogsCarryJobAndDocumentIDs(t *testing.T) {
	t.Parallel()
	_, cl := fakeBroker(t)
	core, logs := observer.New(zap.DebugLevel)
	h := newHandler(t, ingest.Config{}, ingest.Deps{Producer: cl, Logger: zap.New(core)})
	require.Equal(t, 1, logs.FilterMessageSnippet("authentication is off").FilterLevelExact(zap.WarnLevel).Len(),
		"running without bearer tokens is logged as a warning")

	jobID, docID := accepted(t, do(t, h, request{method: "POST", path: "/v1/jobs", body: mutateBody}))
	entries := logs.FilterMessage("job accepted").FilterField(zap.String("job_id", jobID)).FilterField(zap.String("document_id", docID))
	require.Equal(t, 1, entries.Len())
}
