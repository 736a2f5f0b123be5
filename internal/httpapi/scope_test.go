package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/internal/httpapi"
)

func bearerRequest(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// A read token passes a reading route and is refused 403 on a writing one;
// a write token passes both; an unknown or missing token is 401 on both.
func TestBearerScopes(t *testing.T) {
	b := httpapi.NewBearer([]string{"reader"}, []string{"writer"})
	require.False(t, b.Off())
	require.True(t, b.Writable())
	for _, tc := range []struct {
		token  string
		need   httpapi.Scope
		status int
	}{
		{"reader", httpapi.ScopeRead, 0},
		{"reader", httpapi.ScopeWrite, http.StatusForbidden},
		{"writer", httpapi.ScopeRead, 0},
		{"writer", httpapi.ScopeWrite, 0},
		{"stranger", httpapi.ScopeRead, http.StatusUnauthorized},
		{"stranger", httpapi.ScopeWrite, http.StatusUnauthorized},
		{"", httpapi.ScopeRead, http.StatusUnauthorized},
	} {
		e := b.Check(bearerRequest(tc.token), tc.need)
		if tc.status == 0 {
			require.Nil(t, e, "%s for scope %d", tc.token, tc.need)
			continue
		}
		require.NotNil(t, e, "%s for scope %d", tc.token, tc.need)
		require.Equal(t, tc.status, e.Status, tc.token)
		require.Equal(t, "Authorization", e.Field)
		if tc.status == http.StatusForbidden {
			require.Equal(t, httpapi.CodeForbidden, e.Code)
			require.Contains(t, e.Message, "may only read")
		} else {
			require.Equal(t, httpapi.CodeUnauthorized, e.Code)
		}
	}

	// Read tokens alone still authenticate: nobody may write.
	ro := httpapi.NewBearer([]string{"reader"}, nil)
	require.False(t, ro.Off())
	require.False(t, ro.Writable())
	require.Equal(t, http.StatusForbidden, ro.Check(bearerRequest("reader"), httpapi.ScopeWrite).Status)
	require.Equal(t, http.StatusUnauthorized, ro.Check(bearerRequest(""), httpapi.ScopeRead).Status)

	// A token in both lists is a write token.
	both := httpapi.NewBearer([]string{"same"}, []string{"same"})
	require.Nil(t, both.Check(bearerRequest("same"), httpapi.ScopeWrite))
}

func TestCheckTokens(t *testing.T) {
	long := strings.Repeat("k", httpapi.MinTokenLength)
	require.NoError(t, httpapi.CheckTokens("--auth-write-tokens", nil))
	require.NoError(t, httpapi.CheckTokens("--auth-write-tokens", []string{long, " " + long + " "}))

	short := "s3cr3t-but-short"
	err := httpapi.CheckTokens("--auth-read-tokens", []string{long, short})
	require.EqualError(t, err, "--auth-read-tokens: the token at index 1 (0-based) is 16 characters long; a token needs at least 32 (e.g. openssl rand -hex 32)")
	require.NotContains(t, err.Error(), short, "the token itself is never printed")

	err = httpapi.CheckTokens("--auth-tokens", []string{"  "})
	require.EqualError(t, err, "--auth-tokens: the token at index 0 (0-based) is empty")
}

// observed is a logger whose entries a test reads.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.DebugLevel)
	return zap.New(core), logs
}

// Every response carries X-Request-Id; an error body carries the same id,
// and the cause of a failure is logged under it, never sent.
func TestRequestID(t *testing.T) {
	logger, logs := observed()
	h := httpapi.WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			require.Equal(t, w.Header().Get(httpapi.HeaderRequestID), httpapi.RequestID(r), "the handler sees the id it answers with")
			httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		case "/down":
			httpapi.WriteError(w, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
				Message: "the database is unavailable", Cause: errTest("dial tcp 10.1.2.3:5432: connect: connection refused")})
		case "/bug":
			httpapi.WriteJSON(w, http.StatusOK, json.RawMessage(`{"secret": not json}`))
		}
	}), logger)

	serve := func(path string, header ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Add(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	ok := serve("/ok")
	require.Regexp(t, `^[0-9a-f]{32}$`, ok.Header().Get(httpapi.HeaderRequestID))
	require.NotEqual(t, ok.Header().Get(httpapi.HeaderRequestID), serve("/ok").Header().Get(httpapi.HeaderRequestID), "one id per request")

	down := serve("/down")
	require.Equal(t, http.StatusServiceUnavailable, down.Code)
	require.Equal(t, "1", down.Header().Get("Retry-After"))
	id := down.Header().Get(httpapi.HeaderRequestID)
	var body struct {
		Error struct{ Code, Message, RequestID string }
	}
	require.NoError(t, json.Unmarshal(down.Body.Bytes(), &body))
	require.Equal(t, id, body.Error.RequestID, "the body names the id of the header")
	require.NotContains(t, down.Body.String(), "10.1.2.3")
	require.NotContains(t, down.Body.String(), "dial")
	entries := logs.FilterField(zap.String("request_id", id)).All()
	require.Len(t, entries, 1, "the cause is logged under the request id")
	require.Equal(t, zap.WarnLevel, entries[0].Level)
	require.Contains(t, entries[0].ContextMap()["error"], "10.1.2.3:5432")

	// A value that does not encode answers the error shape, not the
	// encoder's message (which quotes the value), and is logged.
	bug := serve("/bug")
	require.Equal(t, http.StatusInternalServerError, bug.Code)
	require.Equal(t, "application/json", bug.Header().Get("Content-Type"))
	require.NotContains(t, bug.Body.String(), "secret")
	require.NoError(t, json.Unmarshal(bug.Body.Bytes(), &body))
	require.Equal(t, httpapi.CodeInternal, body.Error.Code)
	require.Equal(t, bug.Header().Get(httpapi.HeaderRequestID), body.Error.RequestID)
	require.Len(t, logs.FilterField(zap.String("request_id", body.Error.RequestID)).FilterMessage("encode the response").All(), 1)

	// A proxy's id of the safe charset is kept; anything else is replaced.
	require.Equal(t, "edge-7f3a.b_1", serve("/ok", httpapi.HeaderRequestID, "edge-7f3a.b_1").Header().Get(httpapi.HeaderRequestID))
	for _, bad := range [][]string{
		{httpapi.HeaderRequestID, "evil\r\nX-Injected: 1"},
		{httpapi.HeaderRequestID, "has space"},
		{httpapi.HeaderRequestID, strings.Repeat("a", httpapi.MaxRequestIDLength+1)},
		{httpapi.HeaderRequestID, "one", httpapi.HeaderRequestID, "two"},
	} {
		got := serve("/ok", bad...).Header().Get(httpapi.HeaderRequestID)
		require.Regexp(t, `^[0-9a-f]{32}$`, got, "%q is not taken over", bad)
	}
}

// The readiness answers of an API port say ready or not, nothing else.
func TestReadiness(t *testing.T) {
	w := httptest.NewRecorder()
	httpapi.WriteReady(w)
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"status":"ready"}`, w.Body.String())

	w = httptest.NewRecorder()
	httpapi.WriteNotReady(w)
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.JSONEq(t, `{"status":"not ready"}`, w.Body.String())
	require.False(t, bytes.Contains(w.Body.Bytes(), []byte("reason")))
}

type errTest string

func (e errTest) Error() string { return string(e) }

// Request metrics around WithRequestID still label a request by the route
// pattern the mux matched, not as unmatched.
func TestRequestIDKeepsTheRoutePattern(t *testing.T) {
	reg := prometheus.NewRegistry()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteError(w, &httpapi.Error{Status: http.StatusGatewayTimeout, Code: "timeout", Message: "late"})
	})
	h := httpapi.NewRequestMetrics(reg, "test").Wrap(httpapi.WithRequestID(mux, nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/things/7", nil))

	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "doclog_test_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["route"]+" "+labels["code"]] = m.GetCounter().GetValue()
		}
	}
	require.Equal(t, map[string]float64{"GET /v1/things/{id} 504": 1}, got)
}
