package readstore_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/readstore"
)

// What the OpenAPI document forbids, the handler refuses, and what it allows
// the handler takes: an empty includeDeleted or wait is no value, a name's
// 256 characters are counted as characters, not bytes. A request no route
// takes gets the JSON error body.
func TestParametersAsTheDocumentStates(t *testing.T) {
	t.Parallel()
	b := setup(t, readstore.Config{})
	for path, field := range map[string]string{
		"/v1/documents?includeDeleted=": "includeDeleted",
		"/v1/documents?wait=":           "wait",
		"/v1/documents?wait=%2B1s":      "wait",
		"/v1/documents?type=" + url.QueryEscape(strings.Repeat("é", 257)): "type",
	} {
		res := get(t, b.h, path)
		require.Equal(t, http.StatusBadRequest, res.status, "%s: %s", path, res.body)
		require.Equal(t, readstore.CodeInvalidParameter, res.apiError(t).Error.Code, path)
		require.Equal(t, field, res.apiError(t).Error.Field, path)
	}
	for _, path := range []string{
		"/v1/documents?type=" + url.QueryEscape(strings.Repeat("é", 256)),
		"/v1/documents?wait=1m30s", "/v1/documents?wait=1e-3", "/v1/documents?includeDeleted=false",
	} {
		res := get(t, b.h, path)
		require.Equal(t, http.StatusOK, res.status, "%s: %s", path, res.body)
	}

	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodGet, "/v1/nothing", http.StatusNotFound, httpapi.CodeNotFound, ""},
		{http.MethodPost, "/v1/documents", http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "GET, HEAD"},
	} {
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		require.Equal(t, tc.status, rec.Code, rec.Body.String())
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		require.Contains(t, rec.Body.String(), `"code":"`+tc.code+`"`)
		require.Equal(t, tc.allow, rec.Header().Get("Allow"))
		require.NotEmpty(t, rec.Header().Get(httpapi.HeaderRequestID))
	}
}
