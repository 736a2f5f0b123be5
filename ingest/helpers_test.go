package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func registry(t *testing.T) *model.Registry {
	t.Helper()
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	return reg
}

// newHandler builds a handler closed at cleanup.
func newHandler(t *testing.T, cfg ingest.Config, deps ingest.Deps) *ingest.Handler {
	t.Helper()
	if deps.Registry == nil {
		deps.Registry = registry(t)
	}
	if deps.Results == nil {
		deps.Results = noResults{}
	}
	h, err := ingest.NewHandler(cfg, deps)
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

// noResults is a ResultReader for tests that never ask for a status.
type noResults struct{}

func (noResults) JobResults(context.Context, []string) (map[string]oplog.JobResult, error) {
	return map[string]oplog.JobResult{}, nil
}

// countingReader counts the lookups a ResultReader serves.
type countingReader struct {
	ingest.ResultReader
	calls atomic.Int64
	ids   atomic.Int64
}

func (c *countingReader) JobResults(ctx context.Context, ids []string) (map[string]oplog.JobResult, error) {
	c.calls.Add(1)
	c.ids.Add(int64(len(ids)))
	return c.ResultReader.JobResults(ctx, ids)
}

// failingProducer acknowledges nothing.
type failingProducer struct{ err error }

func (p failingProducer) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	err := p.err
	if err == nil {
		err = errors.New("failing producer")
	}
	promise(r, err)
}

// request is one HTTP call in a test.
type request struct {
	method, path string
	body         string
	header       map[string]string
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

// apiError is the error body of a refused request.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

func (r response) apiError(t *testing.T) apiError {
	t.Helper()
	var e apiError
	require.NoError(t, json.Unmarshal(r.body, &e), "body: %s", r.body)
	return e
}

// requireRefused checks that res is an error answer of status and code
// naming field, with a message that holds message and leads with the field.
func requireRefused(t *testing.T, res response, status int, code, field, message string) apiError {
	t.Helper()
	require.Equal(t, status, res.status, "body: %s", res.body)
	e := res.apiError(t)
	require.Equal(t, code, e.Error.Code, "body: %s", res.body)
	require.Equal(t, field, e.Error.Field, "body: %s", res.body)
	require.Contains(t, e.Error.Message, message)
	if field != "" {
		require.True(t, strings.HasPrefix(e.Error.Message, field+": "), "the message leads with the field: %s", e.Error.Message)
	}
	return e
}

// do serves the request through h and checks the response against the
// OpenAPI document: every response a test sees is one the document allows.
func do(t *testing.T, h http.Handler, req request) response {
	t.Helper()
	res, hr := serve(h, req)
	checkSpec(t, hr, res)
	return res
}

// serve serves the request through h without checks, for goroutines that
// must not fail the test themselves.
func serve(h http.Handler, req request) (response, *http.Request) {
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
	}
	hr := httptest.NewRequest(req.method, req.path, body)
	if req.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range req.header {
		if v == "" {
			hr.Header.Del(k)
			continue
		}
		hr.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, hr)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, hr
}

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

// spec loads and validates the embedded OpenAPI document once.
func spec(t *testing.T) routers.Router {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(ingest.OpenAPI)
		if err != nil {
			specErr = err
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			specErr = err
			return
		}
		// Route by path alone: test requests have no real server URL.
		doc.Servers = nil
		specRouter, specErr = legacy.NewRouter(doc)
	})
	require.NoError(t, specErr, "the OpenAPI document must load and validate")
	return specRouter
}

// checkSpec validates a response against the document: its status must be
// declared for the route, and its headers and body must match the schema.
func checkSpec(t *testing.T, hr *http.Request, res response) {
	t.Helper()
	route, params, err := spec(t).FindRoute(hr)
	require.NoError(t, err, "%s %s is not in the OpenAPI document", hr.Method, hr.URL.Path)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: hr, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  res.status,
		Header:  res.header,
		Body:    io.NopCloser(bytes.NewReader(res.body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), in),
		"%s %s answered %d %s, which the OpenAPI document does not allow", hr.Method, hr.URL.Path, res.status, res.body)
}

// checkRequestSpec validates a request the API accepts against the
// document, so the documented request schemas are not looser or stricter
// than the handlers.
func checkRequestSpec(t *testing.T, req request) {
	t.Helper()
	hr := httptest.NewRequest(req.method, req.path, strings.NewReader(req.body))
	if req.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range req.header {
		hr.Header.Set(k, v)
	}
	route, params, err := spec(t).FindRoute(hr)
	require.NoError(t, err)
	require.NoError(t, openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: hr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}), "the OpenAPI document refuses a request the API accepts: %s %s %s", req.method, req.path, req.body)
}
