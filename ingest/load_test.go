package ingest_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// POST /v1/documents/{id}/load produces a load job carrying the operations
// as given, and refuses a malformed one with a 4xx naming the field.
func TestLoadRoute(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic}, ingest.Deps{Producer: kb.producer})
	op := `{"opId": "op-1", "index": 3, "skip": 1, "hash": "aGFzaA==",
		"action": {"id": "a1", "type": "MERGE_PATCH", "scope": "global", "timestampUtcMs": 1764460800000, "input": {"x": 1}}}`
	create := `{"opId": "op-0", "index": 0, "skip": 0, "hash": "aGFzaDA=",
		"action": {"id": "c0", "type": "CREATE_DOCUMENT", "scope": "document", "timestampUtcMs": 1764460799000, "input": {"documentType": "doclog/json"}}}`
	load := request{method: "POST", path: "/v1/documents/doc-l/load", body: `{"documentType": "doclog/json", "operations": [` + create + `,` + op + `]}`}
	checkRequestSpec(t, load)
	id, doc := accepted(t, do(t, h, load))
	require.Equal(t, "doc-l", doc)
	rec, got := decodeOne(t, kb.readRecords(t, 1), id)
	require.Equal(t, "doc-l", string(rec.Key))
	requireSameJob(t, &record.Job{
		JobID: id, Kind: record.KindLoad, DocumentID: "doc-l", DocumentType: "doclog/json", Branch: "main", Actions: []oplog.Action{},
		Operations: []record.LoadOperation{
			{OpID: "op-0", Index: 0, Skip: 0, Hash: "aGFzaDA=", Action: oplog.Action{ID: "c0", Type: "CREATE_DOCUMENT", Scope: "document", TimestampUtcMs: 1764460799000, Input: json.RawMessage(`{"documentType":"doclog/json"}`)}},
			{OpID: "op-1", Index: 3, Skip: 1, Hash: "aGFzaA==", Action: oplog.Action{ID: "a1", Type: "MERGE_PATCH", Scope: "global", TimestampUtcMs: 1764460800000, Input: json.RawMessage(`{"x":1}`)}},
		},
		SubmittedAtUtcMs: got.SubmittedAtUtcMs,
	}, got)

	for _, tc := range []struct {
		name, body, field, message string
		status                     int
	}{
		{"no operations", `{"documentType": "doclog/json", "operations": []}`, "operations", "required", http.StatusUnprocessableEntity},
		{"no hash", `{"documentType": "doclog/json", "operations": [{"opId": "o", "index": 0, "skip": 0, "action": {"id": "a", "type": "MERGE_PATCH", "scope": "global", "timestampUtcMs": 1, "input": {}}}]}`, "operations[0].hash", "required", http.StatusUnprocessableEntity},
		{"no index", `{"documentType": "doclog/json", "operations": [{"opId": "o", "skip": 0, "hash": "h", "action": {"id": "a", "type": "MERGE_PATCH", "scope": "global", "timestampUtcMs": 1, "input": {}}}]}`, "operations[0].index", "required", http.StatusUnprocessableEntity},
		{"no action id", `{"documentType": "doclog/json", "operations": [{"opId": "o", "index": 0, "skip": 0, "hash": "h", "action": {"type": "MERGE_PATCH", "scope": "global", "timestampUtcMs": 1, "input": {}}}]}`, "operations[0].action.id", "origin's id", http.StatusUnprocessableEntity},
		{"no timestamp", `{"documentType": "doclog/json", "operations": [{"opId": "o", "index": 0, "skip": 0, "hash": "h", "action": {"id": "a", "type": "MERGE_PATCH", "scope": "global", "input": {}}}]}`, "operations[0].action.timestampUtcMs", "origin's timestamp", http.StatusUnprocessableEntity},
		{"unknown action", `{"documentType": "doclog/json", "operations": [{"opId": "o", "index": 0, "skip": 0, "hash": "h", "action": {"id": "a", "type": "NOPE", "scope": "global", "timestampUtcMs": 1, "input": {}}}]}`, "operations[0].action.type", "not an action of doclog/json", http.StatusUnprocessableEntity},
		{"skip beyond index", `{"documentType": "doclog/json", "operations": [{"opId": "o", "index": 0, "skip": 1, "hash": "h", "action": {"id": "a", "type": "MERGE_PATCH", "scope": "global", "timestampUtcMs": 1, "input": {}}}]}`, "operations[0].skip", "outside 0..index", http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, h, request{method: "POST", path: "/v1/documents/doc-l/load", body: tc.body})
			e := res.apiError(t)
			require.Equal(t, tc.status, res.status, "body: %s", res.body)
			require.Equal(t, tc.field, e.Error.Field, "body: %s", res.body)
			require.Contains(t, e.Error.Message, tc.message)
		})
	}
}
