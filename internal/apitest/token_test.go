package apitest_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/readstore"
)

// The consistency token a job's status returns over HTTP is what the read
// store takes: copied verbatim into the header or the query parameter, it
// gives read-your-writes; the structured coordinates beside it are not a
// token, and the read store's refusal says what is.
func TestStatusTokenGivesReadYourWrites(t *testing.T) {
	t.Parallel()
	a := startApp(t)
	ingestURL, readstoreURL := "http://"+a.Addr(app.RoleIngest), "http://"+a.Addr(app.RoleReadstore)

	const doc = "doc-ryw"
	awaitStatus(t, ingestURL, submit(t, ingestURL, `{"documentId":"`+doc+`","documentType":"doclog/json","name":"ryw"}`), "WRITE_READY", "READ_READY")
	code, raw := call(t, http.MethodPost, ingestURL+"/v1/jobs", writeToken,
		`{"documentId":"`+doc+`","documentType":"doclog/json","actions":[{"type":"MERGE_PATCH","scope":"global","input":{"seen":"mine"}}]}`)
	require.Equal(t, http.StatusAccepted, code, "%s", raw)
	var accepted struct{ JobID string }
	require.NoError(t, json.Unmarshal(raw, &accepted))
	status := awaitStatus(t, ingestURL, accepted.JobID, "WRITE_READY", "READ_READY")
	require.NotEmpty(t, status.ConsistencyToken)
	require.Len(t, status.Coordinates, 1, "one coordinate: the global stream the job wrote")
	require.Equal(t, doc, status.Coordinates[0]["documentId"])

	// Straight after WRITE_READY, with no wait of the client's own: the
	// read waits for the document view.
	for _, read := range []struct {
		name, path string
		header     []string
	}{
		{name: "header", path: "/v1/documents/" + doc + "?wait=30s", header: []string{readstore.TokenHeader, status.ConsistencyToken}},
		{name: "query", path: "/v1/documents/" + doc + "?wait=30s&consistencyToken=" + url.QueryEscape(status.ConsistencyToken)},
	} {
		code, raw := call(t, http.MethodGet, readstoreURL+read.path, readToken, "", read.header...)
		require.Equal(t, http.StatusOK, code, "%s: %s", read.name, raw)
		require.Contains(t, string(raw), `"seen":"mine"`, "%s: the job's write is visible with its token", read.name)
	}

	// The coordinates JSON is not a token; the refusal explains the form.
	coords, err := json.Marshal(map[string]any{"coordinates": status.Coordinates})
	require.NoError(t, err)
	code, raw = call(t, http.MethodGet, readstoreURL+"/v1/documents/"+doc, readToken, "", readstore.TokenHeader, string(coords))
	require.Equal(t, http.StatusBadRequest, code, "%s", raw)
	var refusal struct {
		Error struct{ Code, Message string }
	}
	require.NoError(t, json.Unmarshal(raw, &refusal))
	require.Equal(t, readstore.CodeInvalidToken, refusal.Error.Code)
	require.Contains(t, refusal.Error.Message, "a consistency token is the opaque string a job's status returns in consistencyToken")
	require.Contains(t, refusal.Error.Message, "copy it as is")
}

// jobStatus is the part of GET /v1/jobs/{id} the tests read.
type jobStatus struct {
	Status           string
	ConsistencyToken string
	Coordinates      []map[string]any
	ErrorHistory     json.RawMessage
}

// awaitStatus polls the job's status until it is one of want, failing the
// test if the job fails.
func awaitStatus(t *testing.T, ingestURL, jobID string, want ...string) jobStatus {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, raw := call(t, http.MethodGet, ingestURL+"/v1/jobs/"+jobID+"?wait=5s", readToken, "")
		require.Equal(t, http.StatusOK, code, "%s", raw)
		var s jobStatus
		require.NoError(t, json.Unmarshal(raw, &s))
		require.NotEqual(t, "FAILED", s.Status, "job %s failed: %s", jobID, s.ErrorHistory)
		if slices.Contains(want, s.Status) {
			return s
		}
		require.True(t, time.Now().Before(deadline), "job %s was not %v within 2 minutes (%s)", jobID, want, s.Status)
	}
}
