package readstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/readstore/pgread"
)

// bundle is one test's services: an isolated schema with the log and both
// projections migrated, a write-ready topic, a workload writing real
// operations, and the read store's handler over them.
type bundle struct {
	t     *testing.T
	env   *projtest.Env
	w     *projtest.Workload
	store *countingStore
	reg   *prometheus.Registry
	h     *readstore.Handler
}

func setup(t *testing.T, cfg readstore.Config) *bundle { return setupStore(t, cfg, false) }

// setupStore is setup, with the store's progress notifications followed
// when notified (otherwise the counting store hides them, and every wait
// ends by a poll).
func setupStore(t *testing.T, cfg readstore.Config, notified bool) *bundle {
	t.Helper()
	env := projtest.New(t, docview.Migrations(), indexer.Migrations())
	pg := pgread.New(env.Pool)
	store := &countingStore{Store: pg}
	var served readstore.Store = store
	if notified {
		served = notifyingStore{countingStore: store, notifier: pg}
	}
	reg := prometheus.NewRegistry()
	h, err := readstore.NewHandler(cfg, readstore.Deps{Store: served, Log: env.Log, Registry: env.Registry, Logger: projtest.Logger(), Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return &bundle{t: t, env: env, w: env.NewWorkload(uint64(time.Now().UnixNano())), store: store, reg: reg, h: h}
}

// metric returns the value of the counter or gauge series name with the
// labels (name=value pairs), 0 when it has none.
func (b *bundle) metric(name string, labels ...string) float64 {
	b.t.Helper()
	families, err := b.reg.Gather()
	require.NoError(b.t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// startProjectors runs the docview and indexer projectors through the real
// runner, consuming the test's write-ready topic from the start.
func (b *bundle) startProjectors() {
	b.t.Helper()
	b.env.Start(b.env.Config(docview.Projector{}, "docview"))
	b.env.Start(b.env.Config(indexer.Projector{}, "indexer"))
}

// countingStore counts the progress lookups the handler makes.
type countingStore struct {
	readstore.Store
	progressCalls atomic.Int64
}

func (c *countingStore) Progress(ctx context.Context, s readstore.Source, streams []oplog.StreamKey) (map[oplog.StreamKey]readstore.StreamProgress, error) {
	c.progressCalls.Add(1)
	return c.Store.Progress(ctx, s, streams)
}

// notifyingStore is a countingStore that passes on its store's progress
// notifications.
type notifyingStore struct {
	*countingStore
	notifier readstore.ProgressNotifier
}

func (n notifyingStore) WatchProgress(ctx context.Context, progressed func(readstore.Source), failed func(error)) {
	n.notifier.WatchProgress(ctx, progressed, failed)
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

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
	r.decode(t, &e)
	return e
}

// get serves GET path through h and checks the response against the
// OpenAPI document: every response a test sees is one the document allows,
// and every request the API accepts is one the document allows too.
func get(t *testing.T, h http.Handler, path string, header ...string) response {
	t.Helper()
	res, hr := serve(h, path, header...)
	checkSpec(t, hr, res)
	if res.status < 300 {
		checkRequestSpec(t, hr)
	}
	return res
}

// checkRequestSpec validates an accepted request against the document, so
// the documented parameters are neither looser nor stricter than the
// handlers.
func checkRequestSpec(t *testing.T, hr *http.Request) {
	t.Helper()
	route, params, err := spec(t).FindRoute(hr)
	require.NoError(t, err)
	require.NoError(t, openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: hr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}), "the OpenAPI document refuses a request the API accepts: %s", hr.URL)
}

// serve serves GET path without checks, for goroutines. header holds
// name/value pairs.
func serve(h http.Handler, path string, header ...string) (response, *http.Request) {
	hr := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		hr.Header.Add(header[i], header[i+1])
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

func spec(t *testing.T) routers.Router {
	t.Helper()
	specOnce.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromData(readstore.OpenAPI)
		if err != nil {
			specErr = err
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			specErr = err
			return
		}
		doc.Servers = nil // route by path alone
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
		"%s %s answered %d %s, which the OpenAPI document does not allow", hr.Method, hr.URL.String(), res.status, res.body)
}

// tokenOf is the wire form of the job's consistency token.
func tokenOf(t oplog.ConsistencyToken) string { return oplog.EncodeToken(t) }
