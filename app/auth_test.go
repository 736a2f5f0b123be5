package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/testenv"
)

// The token lists as a deployment sets them: --auth-write-tokens and the
// older --auth-tokens submit; --auth-read-tokens reads a job's status and the
// read store but is refused 403 on a submit; no token is 401 on both APIs.
func TestTokenScopes(t *testing.T) {
	t.Parallel()
	const (
		writer = "write-token-for-the-scope-test-0123456789"
		legacy = "legacy-token-for-the-scope-test-012345678"
		reader = "read-token-for-the-scope-test-01234567890"
	)
	s := settings([]string{app.RoleIngest, app.RoleReadstore}, testenv.PostgresSchema(t), testenv.Kafka(t))
	s.AuthWriteTokens, s.AuthTokens, s.AuthReadTokens = []string{writer}, []string{legacy}, []string{reader}
	r := start(t, s)
	r.awaitReadyz(http.StatusOK, 3*time.Minute)
	ingestURL := "http://" + r.app.Addr(app.RoleIngest)
	readURL := "http://" + r.app.Addr(app.RoleReadstore)

	call := func(method, url, token, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m), "%s %s: %s", method, url, raw)
		return resp.StatusCode, m
	}
	create := `{"documentType":"doclog/json"}`

	var jobs []string
	for _, tok := range []string{writer, legacy} {
		code, body := call("POST", ingestURL+"/v1/documents", tok, create)
		require.Equal(t, http.StatusAccepted, code, "%v", body)
		jobs = append(jobs, body["jobId"].(string))
	}

	code, body := call("POST", ingestURL+"/v1/documents", reader, create)
	require.Equal(t, http.StatusForbidden, code, "%v", body)
	require.Equal(t, "forbidden", body["error"].(map[string]any)["code"])
	code, _ = call("POST", ingestURL+"/v1/documents", "", create)
	require.Equal(t, http.StatusUnauthorized, code)

	for _, tok := range []string{reader, writer, legacy} {
		code, body = call("GET", ingestURL+"/v1/jobs/"+jobs[0], tok, "")
		require.Equal(t, http.StatusOK, code, "%v", body)
		require.Equal(t, jobs[0], body["jobId"])
		code, body = call("GET", readURL+"/v1/documents", tok, "")
		require.Equal(t, http.StatusOK, code, "%v", body)
	}
	code, _ = call("GET", readURL+"/v1/documents", "", "")
	require.Equal(t, http.StatusUnauthorized, code)
}
