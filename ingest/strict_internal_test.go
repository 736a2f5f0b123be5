package ingest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/jsonvalue"
)

// FuzzDecodeStrictAgrees checks the premise of jsonvalue.DecodeStrict's
// fast path on the request bodies: whatever encoding/json/v2 accepts
// strictly, encoding/json (v1) accepts and decodes to the same value.
func FuzzDecodeStrictAgrees(f *testing.F) {
	for _, s := range []string{
		`{"documentId":"d","documentType":"doclog/json","actions":[{"type":"MERGE_PATCH","scope":"global","input":{"a":1}}]}`,
		`{"documentId":"d","documentType":"doclog/json","branch":null,"queueHint":["x"],"maxRetries":3,"meta":{"k":[true,null]},"name":"n","slug":"s"}`,
		`{"id":"a","type":"T","scope":"global","timestampUtcMs":17,"input":"x","context":null}`,
		`{"documentId":"d","DOCUMENTID":"e"}`, `{"documentId":"d","documentId":"e"}`, `{"maxRetries":1.5}`,
		`{"actions":null}`, `null`, `[]`, `{}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, jsonvalue.CheckAgreement(data,
			func() any { return new(jobBody) },
			func() any { return new(createBody) },
			func() any { return new(actionBody) },
		))
	})
}
