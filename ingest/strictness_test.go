package ingest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/internal/httpapi"
)

// What the OpenAPI document forbids, the handler refuses, before anything is
// produced: a null where the document has no null (encoding/json would take
// it for a field left out), an empty value where absence means a default, a
// ?wait= given empty. A request no route takes gets the JSON error body.
func TestRefusesWhatTheDocumentForbids(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ingest.Config{}, ingest.Deps{Producer: failingProducer{}})
	const deposit = `{"type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": 1}}`
	for _, tc := range []struct {
		name    string
		req     request
		status  int
		code    string
		field   string
		message string
	}{
		{"null queue hint", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "queueHint": null, "actions": [` + deposit + `]}`},
			400, ingest.CodeMalformedJSON, "queueHint", "queueHint: must not be null; leave the field out instead"},
		{"null branch", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "branch": null, "actions": [` + deposit + `]}`},
			400, ingest.CodeMalformedJSON, "branch", "branch: must not be null"},
		{"null name", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json", "name": null}`},
			400, ingest.CodeMalformedJSON, "name", "name: must not be null"},
		{"null actions of a create", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json", "actions": null}`},
			400, ingest.CodeMalformedJSON, "actions", "actions: must not be null"},
		{"null action timestamp", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "actions": [{"type": "DEPOSIT", "scope": "global", "timestampUtcMs": null}]}`},
			400, ingest.CodeMalformedJSON, "actions[0].timestampUtcMs", "actions[0].timestampUtcMs: must not be null"},
		{"empty document id of a create", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json", "documentId": ""}`},
			422, ingest.CodeInvalidField, "documentId", "documentId: empty; leave it out for the default"},
		{"empty wait", request{method: "GET", path: "/v1/jobs/01938f1e-7c2a-7b3e-9d4f-5a6b7c8d9e0f?wait="},
			400, ingest.CodeInvalidField, "wait", `wait: "" is not a duration`},
		{"signed wait", request{method: "GET", path: "/v1/jobs/01938f1e-7c2a-7b3e-9d4f-5a6b7c8d9e0f?wait=%2B5s"},
			400, ingest.CodeInvalidField, "wait", `wait: "+5s" is not a duration`},
	} {
		res := do(t, h, tc.req)
		require.Equal(t, tc.status, res.status, "%s: %s", tc.name, res.body)
		e := res.apiError(t)
		require.Equal(t, tc.code, e.Error.Code, tc.name)
		require.Equal(t, tc.field, e.Error.Field, tc.name)
		require.Contains(t, e.Error.Message, tc.message, tc.name)
	}

	// What the document allows as null is still taken as absent.
	res := do(t, h, request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/json", "meta": null,` +
		`"actions": [{"type": "MERGE_PATCH", "scope": "global", "input": {"a": 1}, "context": null}]}`})
	require.Equal(t, http.StatusServiceUnavailable, res.status, "refused only by the failing producer: %s", res.body)

	res, _ = serve(h, request{method: "GET", path: "/v1/nothing"})
	require.Equal(t, http.StatusNotFound, res.status)
	require.Equal(t, httpapi.CodeNotFound, res.apiError(t).Error.Code)
	require.NotEmpty(t, res.header.Get(httpapi.HeaderRequestID))
	res, _ = serve(h, request{method: "PUT", path: "/v1/jobs"})
	require.Equal(t, http.StatusMethodNotAllowed, res.status)
	require.Equal(t, "POST", res.header.Get("Allow"))
	require.Equal(t, httpapi.CodeMethodNotAllowed, res.apiError(t).Error.Code)
}
