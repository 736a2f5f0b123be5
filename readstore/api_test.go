package readstore_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/readstore"
)

func TestBadRequestsNameTheParameter(t *testing.T) {
	t.Parallel()
	b := setup(t, readstore.Config{})
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	cases := []struct {
		path, header string
		code, field  string
		message      string
	}{
		{path: "/v1/documents?limit=0", field: "limit", message: "limit: must be at least 1"},
		{path: "/v1/documents?limit=abc", field: "limit", message: `"abc" is not an integer`},
		{path: "/v1/documents?limit=1001", field: "limit", message: "at most 1000"},
		{path: "/v1/documents?bogus=1", field: "bogus", message: "unknown query parameter"},
		{path: "/v1/documents?type=a&type=b", field: "type", message: "given 2 times"},
		{path: "/v1/documents?cursor=%21%21", field: "cursor"},
		{path: "/v1/documents?includeDeleted=maybe", field: "includeDeleted"},
		{path: "/v1/documents?branch=", field: "branch", message: "must not be empty"},
		{path: "/v1/documents/x?scope=", field: "scope"},
		{path: "/v1/documents/x?wait=forever", field: "wait", message: "not a duration"},
		{path: "/v1/documents/x?wait=-1s", field: "wait", message: "negative"},
		{path: "/v1/documents/x?wait=NaN", field: "wait", message: "not a duration"},
		{path: "/v1/documents/x?wait=-0.5", field: "wait", message: "negative"},
		{path: "/v1/documents/x/relationships?direction=up", field: "direction"},
		{path: "/v1/documents/x/operations?since=-1", field: "since"},
		{path: "/v1/documents/x/state?revision=0", field: "revision"},
		{path: "/v1/documents/x", header: "%%%", code: readstore.CodeInvalidToken, field: readstore.TokenHeader, message: "not base64url"},
		{path: "/v1/documents/x?consistencyToken=" + b64(`[1]`), code: readstore.CodeInvalidToken, field: readstore.TokenParam, message: "not a JSON object"},
		{path: "/v1/documents/x?consistencyToken=" + b64(`{}`), code: readstore.CodeInvalidToken, field: readstore.TokenParam, message: "coordinates: missing"},
		{path: "/v1/documents/x?consistencyToken=" + b64(`{"coordinates":[{"scope":"global","index":1}]}`),
			code: readstore.CodeInvalidToken, field: readstore.TokenParam, message: "coordinates[0].documentId: missing"},
		{path: "/v1/documents/x?consistencyToken=" + b64(`{"coordinates":[{"documentId":"d","scope":"global","index":-1}]}`),
			code: readstore.CodeInvalidToken, field: readstore.TokenParam, message: "coordinates[0].index: -1 is negative"},
		{path: "/v1/documents/x?consistencyToken=" + b64(`{"coordinates":[],"extra":1}`), code: readstore.CodeInvalidToken, field: readstore.TokenParam},
		{path: "/v1/documents/x?consistencyToken=" + b64(`{"coordinates":[]}`), header: b64(`{"coordinates":[{"documentId":"d","scope":"s","index":0}]}`),
			code: readstore.CodeInvalidToken, field: readstore.TokenParam, message: "differs from"},
	}
	for _, c := range cases {
		var header []string
		if c.header != "" {
			header = []string{readstore.TokenHeader, c.header}
		}
		res := get(t, b.h, c.path, header...)
		require.Equal(t, 400, res.status, "%s: %s", c.path, res.body)
		e := res.apiError(t)
		code := c.code
		if code == "" {
			code = readstore.CodeInvalidParameter
		}
		require.Equal(t, code, e.Error.Code, c.path)
		require.Equal(t, c.field, e.Error.Field, c.path)
		require.True(t, strings.HasPrefix(e.Error.Message, c.field+": "), "%s: the message leads with the field: %s", c.path, e.Error.Message)
		require.Contains(t, e.Error.Message, c.message, c.path)
		if c.code == readstore.CodeInvalidToken && c.message != "differs from" {
			require.Contains(t, e.Error.Message, "the opaque string a job's status returns in consistencyToken", "%s: an undecodable token's error explains the form", c.path)
			require.True(t, strings.HasSuffix(e.Error.Message, "copy it as is"), c.path)
		}
	}

	// An empty token waits for nothing.
	res := get(t, b.h, "/v1/documents?consistencyToken="+b64(`{"coordinates":[]}`))
	require.Equal(t, 200, res.status, "%s", res.body)
}

func TestBearerAuthAndProbes(t *testing.T) {
	t.Parallel()
	b := setup(t, readstore.Config{BearerTokens: []string{"old-secret", "new-secret"}})
	for _, path := range []string{"/v1/documents", "/v1/documents/x", "/v1/documents/x/operations", "/v1/documents/x/relationships", "/v1/documents/x/state"} {
		res := get(t, b.h, path)
		require.Equal(t, 401, res.status, path)
		require.Equal(t, readstore.CodeUnauthorized, res.apiError(t).Error.Code)
		require.Equal(t, "Authorization", res.apiError(t).Error.Field)
		require.NotEmpty(t, res.header.Get("WWW-Authenticate"))

		res = get(t, b.h, path, "Authorization", "Bearer wrong")
		require.Equal(t, 401, res.status, path)
		require.Contains(t, res.apiError(t).Error.Message, "not valid")
	}
	res := get(t, b.h, "/v1/documents", "Authorization", "Bearer new-secret")
	require.Equal(t, 200, res.status, "%s", res.body)
	res = get(t, b.h, "/v1/documents/x", "Authorization", "bearer old-secret")
	require.Equal(t, 404, res.status, "%s", res.body)

	require.Equal(t, 200, get(t, b.h, "/healthz").status)
	require.Equal(t, 200, get(t, b.h, "/readyz").status)
	// The document is its own schema: checked for bytes and media type.
	res, _ = serve(b.h, "/openapi.yaml")
	require.Equal(t, 200, res.status)
	require.Equal(t, "application/yaml", res.header.Get("Content-Type"))
	require.Equal(t, readstore.OpenAPI, res.body)
}

func TestConfig(t *testing.T) {
	t.Parallel()
	c := readstore.Config{}.WithDefaults()
	require.NoError(t, c.Validate())
	require.Equal(t, readstore.DefaultWait, c.DefaultWait)
	require.Equal(t, readstore.DefaultMaxWait, c.MaxWait)
	for _, bad := range []readstore.Config{
		{BearerTokens: []string{""}},
		{DefaultWait: time.Minute, MaxWait: time.Second},
		{PollInterval: -1},
		{PollBatch: -1},
		{DefaultPageLimit: 50, MaxPageLimit: 10},
	} {
		require.Error(t, bad.WithDefaults().Validate(), "%+v", bad)
	}
	require.Equal(t, readstore.DefaultFeedMaxStreams, c.FeedMaxStreams)
	require.Equal(t, readstore.DefaultFeedHeartbeat, c.FeedHeartbeat)
	require.Equal(t, readstore.DefaultFeedWriteTimeout, c.FeedWriteTimeout)
	require.Equal(t, readstore.DefaultFeedMaxAge, c.FeedMaxAge)
	require.Equal(t, readstore.DefaultFeedPollInterval, c.FeedPollInterval)
	require.Equal(t, readstore.DefaultFeedPageSize, c.FeedPageSize)
	require.Equal(t, readstore.DefaultFeedMaxFilterValues, c.FeedMaxFilterValues)
	for bad, msg := range map[*readstore.Config]string{
		{FeedMaxStreams: -1}:                                  "feed max streams must be at least 1",
		{FeedPageSize: -5}:                                    "feed page size must be at least 1",
		{FeedMaxFilterValues: -1}:                             "feed max filter values must be at least 1",
		{FeedHeartbeat: -time.Second}:                         "feed heartbeat must be positive",
		{FeedWriteTimeout: -time.Second}:                      "feed write timeout must be positive",
		{FeedPollInterval: -time.Second}:                      "feed poll interval must be positive",
		{FeedMaxAge: time.Second, FeedHeartbeat: time.Minute}: "feed heartbeat 1m0s must be shorter than the feed max age 1s",
	} {
		require.ErrorContains(t, bad.WithDefaults().Validate(), msg, "%+v", *bad)
	}
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	_, err = readstore.NewHandler(readstore.Config{}, readstore.Deps{Registry: reg})
	require.ErrorContains(t, err, "projection store")
}

func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, readstore.Config{})
	srv, err := readstore.NewServer(readstore.Config{Addr: "127.0.0.1:0"}, readstore.Deps{
		Store: b.store, Log: b.env.Log, Registry: b.env.Registry,
	})
	require.NoError(t, err)
	require.Nil(t, srv.Addr())
	ctx := t.Context()
	require.NoError(t, srv.Start(ctx))
	require.Error(t, srv.Start(ctx), "starting twice fails")

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+srv.Addr().String()+"/readyz", nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	require.NoError(t, res.Body.Close())
	require.Equal(t, 200, res.StatusCode)
	http.DefaultClient.CloseIdleConnections()

	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Stop(stopCtx))
	require.NoError(t, srv.Stop(stopCtx), "stopping twice is harmless")

	never, err := readstore.NewServer(readstore.Config{}, readstore.Deps{Store: b.store, Log: b.env.Log, Registry: b.env.Registry})
	require.NoError(t, err)
	require.NoError(t, never.Stop(ctx), "stopping a server never started is harmless")
}
