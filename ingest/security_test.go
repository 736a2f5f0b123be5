package ingest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/log/postgres"
)

// requestIDOf returns the request id a response carries, after checking
// that the header and the error body agree on it.
func requestIDOf(t *testing.T, res response) string {
	t.Helper()
	id := res.header.Get(httpapi.HeaderRequestID)
	require.NotEmpty(t, id, "every response names its request id")
	var body struct {
		Error struct {
			RequestID string `json:"requestId"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(res.body, &body), "body: %s", res.body)
	require.Equal(t, id, body.Error.RequestID, "the error body names the id of the header")
	return id
}

// With Kafka and Postgres both down, every route that needs them answers
// 503 with Retry-After and a body that names neither the servers nor the
// database's user and name; the driver's error is in the log under the
// request id the client sees.
func TestOutageAnswersWithoutInternals(t *testing.T) {
	t.Parallel()
	pg, kafka := testenv.DownPostgres(t), testenv.DownKafka(t)
	pool, err := pgxpool.New(testCtx(t), pg.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	producer, err := kgo.NewClient(append(ingest.ProducerOptions(), kgo.SeedBrokers(kafka.URL))...)
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	core, logs := observer.New(zap.DebugLevel)
	h := newHandler(t, ingest.Config{ProduceTimeout: 500 * time.Millisecond, PollInterval: 20 * time.Millisecond},
		ingest.Deps{Producer: producer, Results: postgres.New(pool), Logger: zap.New(core)})

	for _, c := range []struct {
		req    request
		code   string
		logged string // what the log entry holds of the cause
	}{
		{request{method: "POST", path: "/v1/jobs", body: mutateBody}, ingest.CodeBrokerUnavailable, "deadline exceeded"},
		{request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json"}`}, ingest.CodeBrokerUnavailable, "deadline exceeded"},
		{request{method: "DELETE", path: "/v1/documents/doc-1?documentType=doclog/json"}, ingest.CodeBrokerUnavailable, "deadline exceeded"},
		{request{method: "GET", path: "/v1/jobs/" + newV7(t)}, ingest.CodeResultsUnavailable, "leakcheckdb"},
		{request{method: "GET", path: "/v1/jobs/" + newV7(t) + "?wait=300ms"}, ingest.CodeResultsUnavailable, "leakcheckdb"},
	} {
		res, _ := serve(h, c.req)
		what := c.req.method + " " + c.req.path
		require.Equal(t, http.StatusServiceUnavailable, res.status, "%s: %s", what, res.body)
		require.Equal(t, "1", res.header.Get("Retry-After"), what)
		require.Equal(t, c.code, res.apiError(t).Error.Code, what)
		testenv.RequireNoInternals(t, res.body, pg, kafka)
		id := requestIDOf(t, res)
		entries := logs.FilterField(zap.String("request_id", id)).All()
		require.NotEmpty(t, entries, "%s: the failure is logged under request id %s", what, id)
		logged := ""
		for _, e := range entries {
			if err, ok := e.ContextMap()["error"].(string); ok {
				logged += err
			}
		}
		require.Contains(t, logged, c.logged, "%s: the log entry holds the driver's error", what)
	}

	// /readyz answers anyone, so it says not ready and nothing more.
	res, _ := serve(h, request{method: "GET", path: "/readyz"})
	require.Equal(t, http.StatusServiceUnavailable, res.status)
	require.Equal(t, "1", res.header.Get("Retry-After"))
	require.JSONEq(t, `{"status":"not ready"}`, string(res.body))
	require.NotEmpty(t, res.header.Get(httpapi.HeaderRequestID))
	testenv.RequireNoInternals(t, res.body, pg, kafka)

	res, _ = serve(h, request{method: "GET", path: "/healthz"})
	require.Equal(t, http.StatusOK, res.status, "liveness needs no dependency")
}

// A read token may read a job's status but not submit: 403 forbidden on
// every submit route, where a missing or unknown token stays 401; a write
// token (BearerTokens, what --auth-write-tokens and the older --auth-tokens
// set) submits.
func TestReadTokenCannotSubmit(t *testing.T) {
	t.Parallel()
	c, cl := fakeBroker(t)
	const reader, writer = "read-token-0123456789abcdef0123456789", "write-token-0123456789abcdef012345678"
	h := newHandler(t, ingest.Config{ReadTokens: []string{reader}, BearerTokens: []string{writer}}, ingest.Deps{Producer: cl})
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

	submits := []request{
		{method: "POST", path: "/v1/jobs", body: mutateBody},
		{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json"}`},
		{method: "DELETE", path: "/v1/documents/doc-1?documentType=doclog/json"},
	}
	for _, req := range submits {
		req.header = bearer(reader)
		res, _ := serve(h, req)
		require.Equal(t, http.StatusForbidden, res.status, "%s %s: %s", req.method, req.path, res.body)
		e := res.apiError(t).Error
		require.Equal(t, ingest.CodeForbidden, e.Code)
		require.Equal(t, "Authorization", e.Field)
		require.Contains(t, e.Message, "may only read")
		requestIDOf(t, res)

		for _, tok := range []string{"", "not-a-configured-token-0123456789abcdef"} {
			req.header = bearer(tok)
			if tok == "" {
				req.header = nil
			}
			res, _ = serve(h, req)
			require.Equal(t, http.StatusUnauthorized, res.status, "%s %s with token %q", req.method, req.path, tok)
		}
	}
	require.Zero(t, stored(c), "a refused submit produced a record")

	status := "/v1/jobs/" + newV7(t)
	res, _ := serve(h, request{method: "GET", path: status, header: bearer(reader)})
	require.Equal(t, http.StatusOK, res.status, "a read token reads a job's status: %s", res.body)
	require.Equal(t, "PENDING", res.json(t)["status"])

	for _, req := range submits {
		req.header = bearer(writer)
		res, _ := serve(h, req)
		require.Equal(t, http.StatusAccepted, res.status, "%s %s with the write token: %s", req.method, req.path, res.body)
	}
	require.Equal(t, int64(len(submits)), stored(c))
	res, _ = serve(h, request{method: "GET", path: status, header: bearer(writer)})
	require.Equal(t, http.StatusOK, res.status, "a write token reads too")
	require.True(t, strings.HasPrefix(res.header.Get("Content-Type"), "application/json"))
}
