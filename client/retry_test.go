package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/client"
)

// recorder is an httptest server answering the n-th request with the n-th
// handler (the last one repeats), recording each request.
type recorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request
}

func newRecorder(t *testing.T, handlers ...http.HandlerFunc) *recorder {
	t.Helper()
	s := &recorder{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.got)
		s.got = append(s.got, r.Clone(context.Background()))
		s.mu.Unlock()
		handlers[min(n, len(handlers)-1)](w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *recorder) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.got...)
}

// reply is one scripted answer.
type reply struct {
	status int
	header map[string]string
	body   string
	// hangUp closes the connection without an answer.
	hangUp bool
}

func (rp reply) serve(w http.ResponseWriter, _ *http.Request) {
	if rp.hangUp {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	if rp.body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rp.status)
	_, _ = w.Write([]byte(rp.body))
}

// newScripted is a recorder answering with the replies in turn.
func newScripted(t *testing.T, replies ...reply) *recorder {
	t.Helper()
	handlers := make([]http.HandlerFunc, len(replies))
	for i, rp := range replies {
		handlers[i] = rp.serve
	}
	return newRecorder(t, handlers...)
}

// newTestClient is a client of both APIs at url with fast retries.
func newTestClient(t *testing.T, url string, cfg client.Config) *client.Client {
	t.Helper()
	cfg.IngestURL, cfg.ReadstoreURL = url, url
	if cfg.BaseDelay == 0 {
		cfg.BaseDelay, cfg.MaxDelay = time.Millisecond, 5*time.Millisecond
	}
	c, err := client.New(cfg)
	require.NoError(t, err)
	return c
}

const accepted = `{"jobId":"0198c0de-0000-7000-8000-000000000001","documentId":"d-1","status":"PENDING","statusUrl":"/v1/jobs/0198c0de-0000-7000-8000-000000000001"}`

func unavailable(retryAfter string) reply {
	return reply{status: 503, header: map[string]string{"Retry-After": retryAfter, "X-Request-Id": "r-503"},
		body: `{"error":{"code":"broker_unavailable","message":"the broker did not acknowledge the job; retry with the same Idempotency-Key","requestId":"r-503"}}`}
}

func TestSubmitRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	s := newScripted(t, unavailable("1"), unavailable("1"), reply{status: 202, body: accepted})
	c := newTestClient(t, s.srv.URL, client.Config{WriteToken: "w", ReadToken: "r", UserAgent: "test-agent"})

	start := time.Now()
	acc, err := c.CreateDocument(context.Background(), client.CreateDocument{DocumentType: "doclog/json"})
	require.NoError(t, err)
	got := s.requests()
	require.Len(t, got, 3)
	key := got[0].Header.Get("Idempotency-Key")
	require.NotEmpty(t, key)
	for _, r := range got {
		require.Equal(t, key, r.Header.Get("Idempotency-Key"), "every attempt carries the key of the first")
		require.Equal(t, "Bearer w", r.Header.Get("Authorization"), "a submit carries the write token")
		require.Equal(t, "test-agent", r.Header.Get("User-Agent"))
		require.Equal(t, "/v1/documents", r.URL.Path)
	}
	require.Equal(t, key, acc.IdempotencyKey)
	require.Equal(t, "d-1", acc.DocumentID)
	// Retry-After: 1 replaced the millisecond backoff before each retry.
	require.GreaterOrEqual(t, time.Since(start), 2*time.Second)
}

func TestSubmitUsesTheCallersKey(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{status: 502, body: "bad gateway"}, reply{status: 202, body: accepted})
	c := newTestClient(t, s.srv.URL, client.Config{Token: "t"})
	acc, err := c.SubmitJob(context.Background(), client.Job{DocumentID: "d-1", DocumentType: "doclog/json",
		Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global"}}}, client.WithIdempotencyKey("orders-42"))
	require.NoError(t, err)
	require.Equal(t, "orders-42", acc.IdempotencyKey)
	got := s.requests()
	require.Len(t, got, 2)
	for _, r := range got {
		require.Equal(t, "orders-42", r.Header.Get("Idempotency-Key"))
		require.Equal(t, "Bearer t", r.Header.Get("Authorization"))
	}
}

func TestEachCallGeneratesItsOwnKey(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{status: 202, body: accepted})
	c := newTestClient(t, s.srv.URL, client.Config{})
	for range 2 {
		_, err := c.DeleteDocument(context.Background(), client.DeleteDocument{DocumentID: "d 1", DocumentType: "doclog/json"})
		require.NoError(t, err)
	}
	got := s.requests()
	require.Len(t, got, 2)
	require.NotEqual(t, got[0].Header.Get("Idempotency-Key"), got[1].Header.Get("Idempotency-Key"))
	require.Equal(t, http.MethodDelete, got[0].Method)
	require.Equal(t, "/v1/documents/d%201", got[0].URL.EscapedPath())
	require.Equal(t, "doclog/json", got[0].URL.Query().Get("documentType"))
	require.Empty(t, got[0].Header.Get("Authorization"), "no token configured, none sent")
}

func TestRefusalsAreNotRetried(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 401, 403, 404, 409, 413, 415, 422, 500} {
		s := newScripted(t, reply{status: status, header: map[string]string{"X-Request-Id": "hdr-id"},
			body: `{"error":{"code":"invalid_field","message":"actions[0].scope: contains a control character","field":"actions[0].scope","requestId":"body-id"}}`})
		c := newTestClient(t, s.srv.URL, client.Config{MaxAttempts: 5})
		_, err := c.CreateDocument(context.Background(), client.CreateDocument{DocumentType: "doclog/json"})
		require.Error(t, err)
		require.Len(t, s.requests(), 1, "status %d is answered once", status)
		var apiErr *client.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, status, apiErr.StatusCode)
		require.Equal(t, "invalid_field", apiErr.Code)
		require.Equal(t, "actions[0].scope", apiErr.Field)
		require.Equal(t, "actions[0].scope: contains a control character", apiErr.Message)
		require.Equal(t, "body-id", apiErr.RequestID, "the body's request id wins over the header's")
		require.Equal(t, http.MethodPost, apiErr.Method)
		require.Contains(t, err.Error(), "invalid_field")
	}
}

func TestAttemptsAreBounded(t *testing.T) {
	t.Parallel()
	for _, status := range []int{429, 502, 503, 504} {
		s := newScripted(t, reply{status: status})
		c := newTestClient(t, s.srv.URL, client.Config{MaxAttempts: 3})
		_, err := c.GetJob(context.Background(), "0198c0de-0000-7000-8000-000000000001")
		require.Error(t, err)
		require.Len(t, s.requests(), 3, "status %d is tried MaxAttempts times", status)
		require.Equal(t, status, client.AsAPIError(err).StatusCode)
	}
}

func TestNetworkErrorsAreRetried(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{hangUp: true}, reply{status: 202, body: accepted})
	c := newTestClient(t, s.srv.URL, client.Config{})
	_, err := c.CreateDocument(context.Background(), client.CreateDocument{DocumentType: "doclog/json"})
	require.NoError(t, err)
	got := s.requests()
	require.Len(t, got, 2)
	require.Equal(t, got[0].Header.Get("Idempotency-Key"), got[1].Header.Get("Idempotency-Key"))
}

func TestConsistencyTimeoutIsNotRetried(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{status: 504,
		body: `{"error":{"code":"consistency_timeout","message":"docview did not reach the consistency token within 5s","requestId":"x"}}`})
	c := newTestClient(t, s.srv.URL, client.Config{})
	_, err := c.GetDocument(context.Background(), "d-1", client.WithConsistencyToken("abc"), client.WithWait(1500*time.Microsecond))
	require.True(t, client.IsConsistencyTimeout(err), "%v", err)
	got := s.requests()
	require.Len(t, got, 1)
	require.Equal(t, "abc", got[0].Header.Get("X-Consistency-Token"))
	require.Equal(t, "2ms", got[0].URL.Query().Get("wait"), "waits are sent in whole milliseconds, rounded up")
}

func TestContextEndsTheRetries(t *testing.T) {
	t.Parallel()
	s := newScripted(t, unavailable("30"))
	c := newTestClient(t, s.srv.URL, client.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, client.IsUnavailable(err), "the last answer stays in the chain: %v", err)
	require.Len(t, s.requests(), 1)
}

func TestProxyAnswerWithoutErrorBody(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{status: 404, header: map[string]string{"X-Request-Id": "hdr-id"}, body: "<html>no such page</html>"})
	c := newTestClient(t, s.srv.URL, client.Config{})
	_, err := c.GetDocument(context.Background(), "d-1")
	var apiErr *client.APIError
	require.True(t, errors.As(err, &apiErr))
	require.True(t, client.IsNotFound(err))
	require.Empty(t, apiErr.Code)
	require.Equal(t, "<html>no such page</html>", apiErr.Message)
	require.Equal(t, "hdr-id", apiErr.RequestID)
}

// A call naming no job or document is refused before any request: its
// path would name another route.
func TestEmptyIDsAreRefused(t *testing.T) {
	t.Parallel()
	s := newScripted(t, reply{status: 200, body: `{}`})
	c := newTestClient(t, s.srv.URL, client.Config{})
	ctx := context.Background()
	_, err := c.GetJob(ctx, "")
	require.ErrorContains(t, err, "the id the call names is empty")
	_, err = c.WaitJob(ctx, "")
	require.Error(t, err)
	_, err = c.GetDocument(ctx, "")
	require.Error(t, err)
	_, err = c.Relationships(ctx, "", client.RelationshipQuery{})
	require.Error(t, err)
	_, err = c.Operations(ctx, "", client.OperationQuery{})
	require.Error(t, err)
	_, err = c.State(ctx, "", client.StateQuery{})
	require.Error(t, err)
	_, err = c.DeleteDocument(ctx, client.DeleteDocument{DocumentType: "doclog/json"})
	require.Error(t, err)
	require.Empty(t, s.requests())
}
