package ingest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := ingest.Config{}.WithDefaults()
	require.NoError(t, c.Validate())
	require.Equal(t, ingest.Config{
		Addr: ":8080", JobsTopic: "doclog.jobs", MaxBodyBytes: 1 << 20, MaxBatchJobs: 1000, MaxBatchBytes: 8 << 20, MaxActionsPerJob: 100, MaxInputBytes: 256 << 10,
		JobsRetention: 7 * 24 * time.Hour, MaxWait: 30 * time.Second, PollInterval: 100 * time.Millisecond, PollBatch: 1000,
		ProduceTimeout: 10 * time.Second, ReadHeaderTimeout: 10 * time.Second, ShutdownTimeout: 30 * time.Second,
		MaxExecutorLag: 300 * time.Millisecond, MaxExecutorLagRecords: 20000, ExecutorLagInterval: 100 * time.Millisecond,
	}, c)

	for _, tc := range []struct {
		name string
		edit func(*ingest.Config)
		want string
	}{
		{"empty token", func(c *ingest.Config) { c.BearerTokens = []string{"a", ""} }, "bearer token 1 is empty"},
		{"body beyond a record", func(c *ingest.Config) { c.MaxBodyBytes = 2 << 20 }, "exceeds the 1048576 bytes a job record may have"},
		{"negative body", func(c *ingest.Config) { c.MaxBodyBytes = -1 }, "max body bytes must be positive"},
		{"no actions", func(c *ingest.Config) { c.MaxActionsPerJob = -1 }, "max actions per job must be at least 1"},
		{"no batch jobs", func(c *ingest.Config) { c.MaxBatchJobs = -1 }, "max batch jobs must be at least 1"},
		{"negative batch", func(c *ingest.Config) { c.MaxBatchBytes = -1 }, "max batch bytes must be positive"},
		{"negative input", func(c *ingest.Config) { c.MaxInputBytes = -1 }, "max input bytes must be positive"},
		{"negative wait", func(c *ingest.Config) { c.MaxWait = -time.Second }, "max wait must be positive"},
		{"negative poll", func(c *ingest.Config) { c.PollInterval = -time.Second }, "poll interval must be positive"},
		{"negative batch", func(c *ingest.Config) { c.PollBatch = -1 }, "poll batch must be at least 1"},
		{"negative lag interval", func(c *ingest.Config) { c.ExecutorLagInterval = -1 }, "executor lag interval must be positive"},
	} {
		c := ingest.Config{}.WithDefaults()
		tc.edit(&c)
		require.ErrorContains(t, c.Validate(), tc.want, tc.name)
	}
	c = ingest.Config{JobsRetention: -1}.WithDefaults()
	require.NoError(t, c.Validate(), "a negative retention means the topic keeps records forever")
	c = ingest.Config{MaxExecutorLag: -1, MaxExecutorLagRecords: -1}.WithDefaults()
	require.NoError(t, c.Validate(), "negative backlog bounds turn backpressure off")
}

func TestNewHandlerNeedsItsDeps(t *testing.T) {
	t.Parallel()
	reg := registry(t)
	for _, tc := range []struct {
		deps ingest.Deps
		want string
	}{
		{ingest.Deps{Results: noResults{}, Registry: reg}, "needs a producer"},
		{ingest.Deps{Producer: failingProducer{}, Registry: reg}, "needs a result reader"},
		{ingest.Deps{Producer: failingProducer{}, Results: noResults{}}, "needs a model registry"},
	} {
		_, err := ingest.NewHandler(ingest.Config{}, tc.deps)
		require.ErrorContains(t, err, tc.want)
	}
	_, err := ingest.NewHandler(ingest.Config{PollBatch: -1}, ingest.Deps{Producer: failingProducer{}, Results: noResults{}, Registry: reg})
	require.ErrorContains(t, err, "poll batch")
}

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ingest.Config{}, ingest.Deps{Producer: failingProducer{}})

	res := do(t, h, request{method: "GET", path: "/openapi.yaml"})
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, ingest.OpenAPI, res.body, "the served document is the embedded one")
	require.Equal(t, http.StatusOK, do(t, h, request{method: "GET", path: "/healthz"}).status)

	// Every operation in the document is served by the handler: none
	// answers with the router's 404 or 405.
	router := spec(t)
	for _, r := range []request{
		{method: "POST", path: "/v1/jobs"}, {method: "POST", path: "/v1/documents"},
		{method: "DELETE", path: "/v1/documents/d"}, {method: "GET", path: "/v1/jobs/x"},
		{method: "GET", path: "/healthz"}, {method: "GET", path: "/readyz"}, {method: "GET", path: "/openapi.yaml"},
	} {
		hr := httptest.NewRequest(r.method, r.path, nil)
		_, _, err := router.FindRoute(hr)
		require.NoError(t, err, "%s %s is documented", r.method, r.path)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, hr)
		require.NotContains(t, []int{http.StatusMethodNotAllowed}, rec.Code, "%s %s is served", r.method, r.path)
		if rec.Code == http.StatusNotFound {
			require.Contains(t, rec.Body.String(), ingest.CodeJobNotFound, "%s %s is served", r.method, r.path)
		}
	}

	// The validator does refuse what the document does not allow, so the
	// checks every test makes through do() mean something.
	hr := httptest.NewRequest("GET", "/v1/jobs/x", nil)
	route, params, err := router.FindRoute(hr)
	require.NoError(t, err)
	for _, bad := range []struct {
		status int
		body   string
	}{
		{http.StatusOK, `{"jobId": "x", "status": "DONE"}`},
		{http.StatusOK, `{"jobId": "x", "status": "PENDING", "extra": 1}`},
		{http.StatusTeapot, `{"error": {"code": "internal", "message": "m"}}`},
		{http.StatusNotFound, `{"error": {"code": "nope", "message": "m"}}`},
	} {
		err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: hr, PathParams: params, Route: route},
			Status:                 bad.status,
			Header:                 http.Header{"Content-Type": {"application/json"}},
			Body:                   io.NopCloser(bytes.NewReader([]byte(bad.body))),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true},
		})
		require.Error(t, err, "%d %s", bad.status, bad.body)
	}
}
