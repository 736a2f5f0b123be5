package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/httpapi"
)

// A request no route takes is answered with the JSON error body: 404
// not_found, or 405 method_not_allowed with the Allow header of the path's
// routes. Matched routes and the mux's redirects are left alone.
func TestRoutes(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("thing")) })
	mux.HandleFunc("DELETE /v1/things/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := httpapi.Routes(mux)
	serve := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	errorOf := func(rec *httptest.ResponseRecorder) (code, message string) {
		t.Helper()
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		var body struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
		return body.Error.Code, body.Error.Message
	}

	rec := serve(http.MethodGet, "/v1/things/a")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "thing", rec.Body.String())
	require.Equal(t, http.StatusNoContent, serve(http.MethodDelete, "/v1/things/a").Code)

	rec = serve(http.MethodGet, "/v1/nothing")
	require.Equal(t, http.StatusNotFound, rec.Code)
	code, msg := errorOf(rec)
	require.Equal(t, httpapi.CodeNotFound, code)
	require.Equal(t, "no route serves /v1/nothing", msg)

	rec = serve(http.MethodPatch, "/v1/things/a")
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, "DELETE, GET, HEAD", rec.Header().Get("Allow"))
	code, msg = errorOf(rec)
	require.Equal(t, httpapi.CodeMethodNotAllowed, code)
	require.Equal(t, "PATCH is not allowed on /v1/things/a; allowed: DELETE, GET, HEAD", msg)

	rec = serve(http.MethodGet, "/v1//things/a")
	require.Equal(t, http.StatusTemporaryRedirect, rec.Code, "a path that cleans to a route is redirected, as net/http does")
	require.Equal(t, "/v1/things/a", rec.Header().Get("Location"))
}

// ParseWait takes exactly what WaitPattern describes, capped at the limit.
func TestParseWait(t *testing.T) {
	t.Parallel()
	const limit = 30 * time.Second
	for v, want := range map[string]time.Duration{
		"0": 0, "0s": 0, "5": 5 * time.Second, "0.25": 250 * time.Millisecond, ".5": 500 * time.Millisecond,
		"500ms": 500 * time.Millisecond, "1m": limit, "1.5s": 1500 * time.Millisecond, "1s500ms": 1500 * time.Millisecond,
		"2e1": 20 * time.Second, "1e300": limit, "1e400": limit, "99999999999999999999h": limit, "10us": 10 * time.Microsecond,
	} {
		got, err := httpapi.ParseWait(v, limit)
		require.NoError(t, err, v)
		require.Equal(t, want, got, v)
	}
	for v, want := range map[string]string{
		"": `"" is not a duration`, "soon": `"soon" is not a duration`, "NaN": "not a duration", "Inf": "not a duration",
		"+5s": "not a duration", "5 s": "not a duration", "5.": "not a duration", "0x10": "not a duration",
		"1_000": "not a duration", "5d": "not a duration", "-1s": "must not be negative", "-0.5": "must not be negative",
	} {
		_, err := httpapi.ParseWait(v, limit)
		require.ErrorContains(t, err, want, v)
	}
}
