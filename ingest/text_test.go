package ingest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
)

// Hostile text in names is refused before anything is produced: a body that
// is not Unicode as malformed JSON (two different invalid ids would
// otherwise decode to the same U+FFFD-laden id), and a control character,
// bidirectional override or line separator in an id, type, scope, branch,
// name or slug as an invalid field naming the field and the character.
func TestHostileTextIsRefused(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic}, ingest.Deps{Producer: kb.producer})
	start := kb.endOffsets(t)

	deposit := `{"type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": 1}}`
	job := func(doc, actions string) string {
		return `{"documentId": "` + doc + `", "documentType": "doclog/ledger", "actions": [` + actions + `]}`
	}
	for _, tc := range []struct {
		name    string
		req     request
		code    string
		field   string
		message string
	}{
		{"body not UTF-8", request{method: "POST", path: "/v1/jobs", body: job("doc-\xff", deposit)},
			ingest.CodeMalformedJSON, "", "the request body is not valid UTF-8 (0xff at byte 20)"},
		{"another body not UTF-8", request{method: "POST", path: "/v1/jobs", body: job("doc-\xfe", deposit)},
			ingest.CodeMalformedJSON, "", "the request body is not valid UTF-8 (0xfe at byte 20)"},
		{"input not UTF-8", request{method: "POST", path: "/v1/jobs", body: job("d", `{"type": "DEPOSIT", "scope": "global", "input": {"accountId": "a`+"\xc3"+`", "amount": 1}}`)},
			ingest.CodeMalformedJSON, "", "the request body is not valid UTF-8 (0xc3 at byte"},
		{"unpaired surrogate", request{method: "POST", path: "/v1/jobs", body: job(`doc-\ud800`, deposit)},
			ingest.CodeMalformedJSON, "", `the request body is not valid Unicode (\ud800 at byte 20 is half of a surrogate pair)`},
		{"escape sequence in documentId", request{method: "POST", path: "/v1/jobs", body: job(`doc\u001b]0;pwned\u0007`, deposit)},
			ingest.CodeInvalidField, "documentId", "documentId: contains a control character (U+001B at byte 3)"},
		{"bell in documentType", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger\u0007", "actions": [` + deposit + `]}`},
			ingest.CodeInvalidField, "documentType", "documentType: contains a control character (U+0007 at byte 13)"},
		{"override in branch", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "branch": "ma` + "\u202e" + `in", "actions": [` + deposit + `]}`},
			ingest.CodeInvalidField, "branch", "branch: contains a bidirectional formatting character (U+202E at byte 2)"},
		{"raw newline in a queueHint id", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "queueHint": ["x` + "\n" + `"], "actions": [` + deposit + `]}`},
			ingest.CodeMalformedJSON, "", "invalid character"},
		{"escaped newline in a queueHint id", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "queueHint": ["x\n"], "actions": [` + deposit + `]}`},
			ingest.CodeInvalidField, "queueHint[0]", "queueHint[0]: contains a control character (U+000A at byte 1)"},
		{"carriage return in a queueHint id", request{method: "POST", path: "/v1/jobs", body: `{"documentId": "d", "documentType": "doclog/ledger", "queueHint": ["x\r"], "actions": [` + deposit + `]}`},
			ingest.CodeInvalidField, "queueHint[0]", "queueHint[0]: contains a control character (U+000D at byte 1)"},
		{"DEL in an action scope", request{method: "POST", path: "/v1/jobs", body: job("d", `{"type": "DEPOSIT", "scope": "glo`+"\x7f"+`bal"}`)},
			ingest.CodeInvalidField, "actions[0].scope", "actions[0].scope: contains a control character (U+007F at byte 3)"},
		{"C1 in an action type", request{method: "POST", path: "/v1/jobs", body: job("d", deposit+`, {"type": "DEP`+"\u009b"+`OSIT", "scope": "global"}`)},
			ingest.CodeInvalidField, "actions[1].type", "actions[1].type: contains a control character (U+009B at byte 3)"},
		{"escape in an action id", request{method: "POST", path: "/v1/jobs", body: job("d", `{"id": "a\u001b[2J", "type": "DEPOSIT", "scope": "global", "input": {"accountId": "a", "amount": 1}}`)},
			ingest.CodeInvalidField, "actions[0].id", "actions[0].id: contains a control character (U+001B at byte 1)"},
		{"escape in a SET_NAME action", request{method: "POST", path: "/v1/jobs", body: job("d", `{"type": "SET_NAME", "scope": "document", "input": {"name": "Q4\u001b[31m"}}`)},
			ingest.CodeInvalidField, "actions[0].input.name", "actions[0].input.name: contains a control character (U+001B at byte 2)"},
		{"isolate in a relationship target", request{method: "POST", path: "/v1/jobs", body: job("d", `{"type": "ADD_RELATIONSHIP", "scope": "document", "input": {"targetId": "c`+"\u2067"+`1"}}`)},
			ingest.CodeInvalidField, "actions[0].input.targetId", "actions[0].input.targetId: contains a bidirectional formatting character (U+2067 at byte 1)"},
		{"escape in a document name", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json", "name": "\u001b]0;pwned\u0007"}`},
			ingest.CodeInvalidField, "name", "name: contains a control character (U+001B at byte 0)"},
		{"separator in a slug", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json", "slug": "a\u2028b"}`},
			ingest.CodeInvalidField, "slug", "slug: contains a line or paragraph separator (U+2028 at byte 1)"},
		{"escape in a created document's id", request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json", "documentId": "\u001bc"}`},
			ingest.CodeInvalidField, "documentId", "documentId: contains a control character (U+001B at byte 0)"},
		{"escape in a deleted document's id", request{method: "DELETE", path: "/v1/documents/doc%1B%5B2J?documentType=doclog/json"},
			ingest.CodeInvalidField, "documentId", "documentId: contains a control character (U+001B at byte 3)"},
		{"deleted document's id not UTF-8", request{method: "DELETE", path: "/v1/documents/doc%FF?documentType=doclog/json"},
			ingest.CodeInvalidField, "documentId", "documentId: not valid UTF-8 (0xff at byte 3)"},
		{"bell in a delete's branch", request{method: "DELETE", path: "/v1/documents/d?documentType=doclog/json&branch=b%07"},
			ingest.CodeInvalidField, "branch", "branch: contains a control character (U+0007 at byte 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := requireRefused(t, do(t, h, tc.req), http.StatusBadRequest, tc.code, tc.field, tc.message)
			require.False(t, strings.ContainsAny(e.Error.Message, "\x1b\x07\x7f\r\n\u009b\u202e\u2067\u2028"), "the answer does not echo the characters: %q", e.Error.Message)
		})
	}
	t.Cleanup(func() {
		require.Equal(t, start, kb.endOffsets(t), "a refused request produced a record")
	})
}

// Payloads are data: an action's input and context and the job's meta may
// hold newlines and escape sequences, and the record carries them exactly;
// the same text as the job's document id is refused.
func TestPayloadTextIsCarriedAsIs(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic}, ingest.Deps{Producer: kb.producer})

	memo := "line one\nline two\t\x1b[1mbold\x1b[0m \u202e"
	text, err := json.Marshal(memo)
	require.NoError(t, err)
	body := `{"documentId": "doc-payload", "documentType": "doclog/ledger", "meta": {"note": ` + string(text) + `},
		"actions": [{"type": "TRANSFER", "scope": "global", "context": {"why": ` + string(text) + `},
		"input": {"fromAccountId": "a", "toAccountId": "b", "amount": 1, "memo": ` + string(text) + `}}]}`
	jobID, _ := accepted(t, do(t, h, request{method: "POST", path: "/v1/jobs", body: body}))
	_, job := decodeOne(t, kb.readRecords(t, 1), jobID)

	var input struct{ Memo string }
	require.NoError(t, json.Unmarshal(job.Actions[0].Input, &input))
	require.Equal(t, memo, input.Memo)
	var ctx, meta map[string]string
	require.NoError(t, json.Unmarshal(job.Actions[0].Context, &ctx))
	require.NoError(t, json.Unmarshal(job.Meta, &meta))
	require.Equal(t, memo, ctx["why"])
	require.Equal(t, memo, meta["note"])

	requireRefused(t, do(t, h, request{method: "POST", path: "/v1/jobs", body: strings.Replace(body, `"doc-payload"`, string(text), 1)}),
		http.StatusBadRequest, ingest.CodeInvalidField, "documentId", "documentId: contains a control character (U+000A at byte 8)")
}
