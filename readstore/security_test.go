package readstore_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/readstore/pgread"
)

// With Postgres down every route answers 503 unavailable with Retry-After,
// as ingest does, not 500: the outage is the database's, and the client
// retries. The body names neither the server nor the database's user and
// name; the driver's error is in the log under the request id the client
// sees in the header and the body.
func TestOutageIs503WithoutInternals(t *testing.T) {
	t.Parallel()
	pg := testenv.DownPostgres(t)
	pool, err := pgxpool.New(t.Context(), pg.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	core, logs := observer.New(zap.DebugLevel)
	h, err := readstore.NewHandler(readstore.Config{}, readstore.Deps{
		Store: pgread.New(pool), Log: postgres.New(pool), Registry: reg, Logger: zap.New(core)})
	require.NoError(t, err)
	t.Cleanup(h.Close)

	token := url.QueryEscape(tokenOf(oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{
		{DocumentID: "doc-1", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch, Index: 3}}}))
	for _, path := range []string{
		"/v1/documents", "/v1/documents/doc-1", "/v1/documents/doc-1/operations",
		"/v1/documents/doc-1/relationships", "/v1/documents/doc-1/state",
		"/v1/documents/doc-1?consistencyToken=" + token + "&wait=200ms",
		"/v1/documents?consistencyToken=" + token + "&wait=0",
		"/v1/documents/doc-1/operations?consistencyToken=" + token,
	} {
		res, _ := serve(h, path)
		require.Equal(t, http.StatusServiceUnavailable, res.status, "%s: %s", path, res.body)
		require.Equal(t, "1", res.header.Get("Retry-After"), path)
		require.Equal(t, readstore.CodeUnavailable, res.apiError(t).Error.Code, path)
		testenv.RequireNoInternals(t, res.body, pg)

		id := res.header.Get(httpapi.HeaderRequestID)
		require.NotEmpty(t, id, path)
		var body struct {
			Error struct {
				RequestID string `json:"requestId"`
			} `json:"error"`
		}
		res.decode(t, &body)
		require.Equal(t, id, body.Error.RequestID, "%s: the body names the id of the header", path)
		entries := logs.FilterField(zap.String("request_id", id)).All()
		require.Len(t, entries, 1, "%s: one log entry names the request", path)
		require.Contains(t, entries[0].ContextMap()["error"], "leakcheckdb", "%s: the log holds the driver's error", path)
	}

	res, _ := serve(h, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, res.status)
	require.Equal(t, "1", res.header.Get("Retry-After"))
	require.JSONEq(t, `{"status":"not ready"}`, string(res.body), "an API port's /readyz says ready or not, no reason")
	testenv.RequireNoInternals(t, res.body, pg)
	require.Equal(t, http.StatusOK, get(t, h, "/healthz").status)
}

// Every route of the read store reads, so read and write tokens both pass;
// the read store's /readyz needs none.
func TestReadAndWriteTokensRead(t *testing.T) {
	t.Parallel()
	const reader, writer = "read-token-0123456789abcdef0123456789", "write-token-0123456789abcdef012345678"
	b := setup(t, readstore.Config{ReadTokens: []string{reader}, BearerTokens: []string{writer}})
	for _, tok := range []string{reader, writer} {
		res, _ := serve(b.h, "/v1/documents", "Authorization", "Bearer "+tok)
		require.Equal(t, http.StatusOK, res.status, "%s", res.body)
		var found map[string]json.RawMessage
		res.decode(t, &found)
		require.Contains(t, found, "documents")
	}
	res, _ := serve(b.h, "/v1/documents")
	require.Equal(t, http.StatusUnauthorized, res.status)
	res, _ = serve(b.h, "/readyz")
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `{"status":"ready"}`, string(res.body))
}
