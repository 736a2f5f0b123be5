package record_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/record"
)

// Names are held to the text rule and payloads are not: a job whose action
// input, context and meta hold newlines and escape sequences decodes, and
// the same characters in its document id do not.
func TestTextRuleCoversNamesNotPayloads(t *testing.T) {
	t.Parallel()
	hostile := "line one\nline two\r\x1b]0;pwned\x07\x1b[2J\u202e\x7f\u0085"
	text, err := json.Marshal(hostile)
	require.NoError(t, err)
	j := sampleJob()
	j.Actions[0].Input = json.RawMessage(`{"amount":12,"memo":` + string(text) + `}`)
	j.Actions[1].Context = json.RawMessage(`{"user":` + string(text) + `}`)
	j.Meta = json.RawMessage(`{"note":` + string(text) + `}`)
	rec, err := record.NewJobRecord("jobs", j)
	require.NoError(t, err, "payloads are data")
	got, err := record.DecodeJob(rec)
	require.NoError(t, err)
	require.JSONEq(t, string(j.Actions[0].Input), string(got.Actions[0].Input))

	j.DocumentID = "doc" + hostile
	_, err = record.NewJobRecord("jobs", j)
	require.EqualError(t, err, "invalid doclog.job.v1 record: documentId: contains a control character (U+000A at byte 11)")
	require.Equal(t, record.ErrDecode, record.TypeOf(err))
}

// A record refused for the text of its document id still gets its job a
// FAILED verdict, under the id escaped, so the verdict carries none of the
// characters; a value that is not Unicode names the document by its key,
// since the lenient read of the value replaced the bad bytes.
func TestReadableIdentityOfUnsafeText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, value, doc string
	}{
		{"escape sequence", "doc\x1b[2J", `{"jobId":"` + jobID + `","documentId":"doc\u001b[2J"}`, `doc\x1b[2J`},
		{"key kept when the id is unsafe", "doc-1", `{"jobId":"` + jobID + `","documentId":"doc\u0007"}`, "doc-1"},
		{"not UTF-8", "doc-\xff", "{\"jobId\":\"" + jobID + "\",\"documentId\":\"doc-\xff\"}", `doc-\xff`},
		{"unpaired surrogate", "doc-s", `{"jobId":"` + jobID + `","documentId":"doc-\ud800"}`, "doc-s"},
		{"override", "doc\u202e1", `{"jobId":"` + jobID + `","documentId":"doc\u202e1"}`, `doc\u202e1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id, doc, ok := record.ReadableIdentity(&kgo.Record{Key: []byte(tc.key), Value: []byte(tc.value)})
			require.True(t, ok)
			require.Equal(t, jobID, id)
			require.Equal(t, tc.doc, doc)
		})
	}
}
