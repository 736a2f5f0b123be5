package record_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

func TestJobRoundTrip(t *testing.T) {
	t.Parallel()
	j := sampleJob()
	rec, err := record.NewJobRecord("doclog.jobs", j)
	require.NoError(t, err)
	require.Equal(t, "doclog.jobs", rec.Topic)
	require.Equal(t, []byte(docID), rec.Key)
	require.Equal(t, []kgo.RecordHeader{{Key: "doclog-schema", Value: []byte("doclog.job.v1")}}, rec.Headers)
	require.Equal(t, record.SchemaJobV1, record.SchemaOf(rec))
	require.True(t, bytes.HasPrefix(rec.Value, []byte(`{"schema":"doclog.job.v1","jobId":"`+jobID+`"`)), string(rec.Value))

	got, err := record.DecodeJob(rec)
	require.NoError(t, err)
	require.Equal(t, j, got)

	// Minimal job: branch defaults to main, optional fields absent.
	min := []byte(`{"schema":"doclog.job.v1","jobId":"` + jobID + `","kind":"create","documentId":"d1","documentType":"t","actions":[]}`)
	got, err = record.ParseJob(min)
	require.NoError(t, err)
	require.Equal(t, "main", got.Branch)
	require.Nil(t, got.MaxRetries)
	require.Empty(t, got.Actions)
	again := got.AppendJSON(nil)
	require.JSONEq(t, `{"schema":"doclog.job.v1","jobId":"`+jobID+`","kind":"create","documentId":"d1","documentType":"t","branch":"main","actions":[]}`, string(again))
}

// TestJobEncodingMatchesEncodingJSON holds the hand-written encoder to what
// encoding/json writes for the same fields.
func TestJobEncodingMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	j := sampleJob()
	j.DocumentID = "d\"\\\n\t\x01\b\f\x1f\u2028<>&é😀\xff\xe2\x80"
	j.Actions[0].Type = "T\u2029"
	j.Actions[0].Input = json.RawMessage("{ \"a\" : [1, 2,\n\t\"x y\"] }")
	got := j.AppendJSON(nil)
	require.True(t, json.Valid(got), string(got))

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(toJobJSON(j)))
	require.Equal(t, strings.TrimSuffix(buf.String(), "\n"), string(got))
}

func TestDecodeJobErrors(t *testing.T) {
	t.Parallel()
	valid := string(sampleJob().AppendJSON(nil))
	replace := func(old, new string) string {
		require.Contains(t, valid, old)
		return strings.Replace(valid, old, new, 1)
	}
	for _, tc := range []struct {
		name   string
		value  string
		typ    record.ErrorType
		reason string
	}{
		{"empty", "", record.ErrDecode, "empty record value"},
		{"not json", "hello", record.ErrDecode, "malformed JSON at byte 1"},
		{"truncated", valid[:40], record.ErrDecode, "malformed JSON: unexpected end"},
		{"array", "[1]", record.ErrDecode, "the record is a JSON array, not an object"},
		{"trailing data", valid + "{}", record.ErrDecode, "data after the record's JSON value"},
		{"invalid utf-8", replace(docID, "d\xff"), record.ErrDecode, "not valid UTF-8"},
		{"unknown field", replace(`"kind"`, `"kindd"`), record.ErrDecode, `unknown field "kindd"`},
		{"no schema", replace(`"schema":"doclog.job.v1",`, ""), record.ErrDecode, `schema: missing (want "doclog.job.v1")`},
		{"future version", replace("doclog.job.v1", "doclog.job.v2"), record.ErrDecode, `unsupported schema version "doclog.job.v2"; this build reads "doclog.job.v1"`},
		{"other kind", replace("doclog.job.v1", "doclog.write-ready.v1"), record.ErrDecode, `"doclog.write-ready.v1" is not a doclog.job.v1 record`},
		{"wrong type", replace(`"maxRetries":3`, `"maxRetries":"3"`), record.ErrDecode, "maxRetries: a JSON string where an integer is expected"},
		{"missing job id", replace(`"jobId":"`+jobID+`",`, ""), record.ErrDecode, "jobId: missing"},
		{"job id not a uuid", replace(jobID, "job-1"), record.ErrDecode, `jobId: "job-1" is not a UUID`},
		{"upper-case uuid", replace(jobID, strings.ToUpper(jobID)), record.ErrDecode, "is not a UUID"},
		{"bad kind", replace(`"kind":"mutate"`, `"kind":"upsert"`), record.ErrDecode, `kind: "upsert" is not one of create, mutate, delete, load`},
		{"missing document id", replace(`"documentId":"`+docID+`",`, ""), record.ErrDecode, "documentId: missing"},
		{"missing document type", replace(`"documentType":"doclog/ledger",`, ""), record.ErrDecode, "documentType: missing"},
		{"empty branch", replace(`"branch":"main"`, `"branch":""`), record.ErrDecode, "branch: empty"},
		{"long document id", replace(docID, strings.Repeat("x", 257)), record.ErrDecode, "documentId: 257 characters, more than the 256 allowed"},
		{"missing actions", replace(valid[strings.Index(valid, `"actions"`):strings.Index(valid, `,"queueHint"`)+1], ""), record.ErrDecode, "actions: missing"},
		{"mutate without actions", replace(valid[strings.Index(valid, `"actions":[`)+11:strings.Index(valid, `],"queueHint"`)], ""), record.ErrInvalidAction, "a mutate job needs at least one action"},
		{"action without id", replace(`"id":"a-2",`, ""), record.ErrInvalidAction, "actions[1].id: missing"},
		{"action without type", replace(`"type":"ADD_ENTRY",`, ""), record.ErrInvalidAction, "actions[0].type: missing"},
		{"action without scope", replace(`"scope":"document",`, ""), record.ErrInvalidAction, "actions[1].scope: missing"},
		{"action without timestamp", replace(`"timestampUtcMs":1764460800000,`, ""), record.ErrInvalidAction, "actions[0].timestampUtcMs: missing"},
		{"duplicate action id", replace(`"id":"a-2"`, `"id":"a-1"`), record.ErrInvalidAction, `actions[1].id: "a-1" repeats the id of actions[0]`},
		{"action context not an object", replace(`"context":{"user":"ana"}`, `"context":[1]`), record.ErrInvalidAction, "actions[1].context: not a JSON object"},
		{"unknown action field", replace(`"id":"a-2"`, `"id":"a-2","sig":"x"`), record.ErrDecode, `unknown field "sig"`},
		{"signature without key id", replace(`"keyId":"till-7",`, ""), record.ErrInvalidAction, "actions[0].signature.keyId: missing"},
		{"signature without value", replace(`,"value":"c2lnbmVkIGJ5IHRpbGwtNw=="`, ""), record.ErrInvalidAction, "actions[0].signature.value: missing"},
		{"signature not base64", replace(`c2lnbmVkIGJ5IHRpbGwtNw==`, `c2lnbmVk!`), record.ErrInvalidAction, "actions[0].signature.value: not standard base64"},
		{"signature algorithm with a newline", replace(`"algorithm":"ed25519"`, `"algorithm":"ed25519\n"`), record.ErrInvalidAction, "actions[0].signature.algorithm: contains a control character"},
		{"unknown signature field", replace(`"keyId":"till-7"`, `"keyId":"till-7","kid":"x"`), record.ErrDecode, `unknown field "kid"`},
		{"queue hint on itself", replace(jobID2, jobID), record.ErrDecode, "queueHint[0]: a job cannot wait for itself"},
		{"negative retries", replace(`"maxRetries":3`, `"maxRetries":-1`), record.ErrDecode, "maxRetries: -1 is outside 0..1000"},
		{"meta not an object", replace(`"meta":{"traceId":"abc"}`, `"meta":"abc"`), record.ErrDecode, "meta: not a JSON object"},
		{"unpaired surrogate", replace(docID, `d\ud800`), record.ErrDecode, `record value is not valid Unicode (\ud800 at byte`},
		{"escape in document id", replace(docID, `doc\u001b]0;pwned\u0007`), record.ErrDecode, "documentId: contains a control character (U+001B at byte 3)"},
		{"bell in document type", replace(`"doclog/ledger"`, `"doclog/ledger\u0007"`), record.ErrDecode, "documentType: contains a control character (U+0007 at byte 13)"},
		{"override in branch", replace(`"branch":"main"`, "\"branch\":\"ma\u202ein\""), record.ErrDecode, "branch: contains a bidirectional formatting character (U+202E at byte 2)"},
		{"separator in branch", replace(`"branch":"main"`, `"branch":"main\u2028"`), record.ErrDecode, "branch: contains a line or paragraph separator (U+2028 at byte 4)"},
		{"DEL in action scope", replace(`"scope":"document"`, "\"scope\":\"docu\x7fment\""), record.ErrInvalidAction, "actions[1].scope: contains a control character (U+007F at byte 4)"},
		{"C1 in action type", replace(`"type":"ADD_ENTRY"`, "\"type\":\"ADD\u009b_ENTRY\""), record.ErrInvalidAction, "actions[0].type: contains a control character (U+009B at byte 3)"},
		{"newline in action id", replace(`"id":"a-2"`, `"id":"a-2\n"`), record.ErrInvalidAction, "actions[1].id: contains a control character (U+000A at byte 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := record.DecodeJob(&kgo.Record{Key: []byte(docID), Value: []byte(tc.value)})
			var de *record.DecodeError
			require.ErrorAs(t, err, &de)
			require.Equal(t, tc.typ, de.Type, de.Reason)
			require.Equal(t, tc.typ, record.TypeOf(err))
			require.Contains(t, de.Reason, tc.reason)
			require.Equal(t, record.SchemaJobV1, de.Schema)
			require.Equal(t, len(tc.value), de.Size)
			require.True(t, strings.HasPrefix(err.Error(), "decode doclog.job.v1 record: "), err.Error())
		})
	}
}

func TestDecodeJobRecordChecks(t *testing.T) {
	t.Parallel()
	rec, err := record.NewJobRecord("jobs", sampleJob())
	require.NoError(t, err)

	noHeader := *rec
	noHeader.Headers = nil
	_, err = record.DecodeJob(&noHeader)
	require.NoError(t, err, "the header is optional for plain producers; the JSON schema field decides")

	for _, tc := range []struct {
		name   string
		mutate func(r *kgo.Record)
		typ    record.ErrorType
		reason string
	}{
		{"wrong header", func(r *kgo.Record) {
			r.Headers = []kgo.RecordHeader{{Key: "doclog-schema", Value: []byte("doclog.job.v9")}}
		},
			record.ErrDecode, `doclog-schema header: unsupported schema version "doclog.job.v9"`},
		{"two headers", func(r *kgo.Record) { r.Headers = append(r.Headers, r.Headers[0]) }, record.ErrDecode, "more than one doclog-schema header"},
		{"key is another document", func(r *kgo.Record) { r.Key = []byte("doc-other") }, record.ErrDecode, `record key "doc-other" is not the job's documentId "doc-7f3a"`},
		{"null key", func(r *kgo.Record) { r.Key = nil }, record.ErrDecode, "record key null is not"},
		{"oversized", func(r *kgo.Record) { r.Value = append(bytes.Repeat([]byte(" "), 1<<20), r.Value...) }, record.ErrRecordTooLarge, "record value of 1049"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := *rec
			r.Headers = append([]kgo.RecordHeader(nil), rec.Headers...)
			tc.mutate(&r)
			_, err := record.DecodeJob(&r)
			var de *record.DecodeError
			require.ErrorAs(t, err, &de)
			require.Equal(t, tc.typ, de.Type)
			require.Contains(t, de.Reason, tc.reason)
		})
	}

	// A decoder with a smaller bound.
	_, err = record.Decoder{MaxBytes: 100}.Job(rec)
	require.Equal(t, record.ErrRecordTooLarge, record.TypeOf(err))
	require.ErrorContains(t, err, "exceeds the limit of 100")
}

func TestNewJobRecordValidates(t *testing.T) {
	t.Parallel()
	j := sampleJob()
	j.Actions[1].Scope = ""
	_, err := record.NewJobRecord("jobs", j)
	var ve *record.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, record.ValidationError{Schema: record.SchemaJobV1, Field: "actions[1].scope", Reason: "missing", Type: record.ErrInvalidAction}, *ve)
	require.EqualError(t, err, "invalid doclog.job.v1 record: actions[1].scope: missing")

	j = sampleJob()
	j.Actions[0].Input = json.RawMessage(`{"a":`)
	_, err = record.NewJobRecord("jobs", j)
	require.EqualError(t, err, "invalid doclog.job.v1 record: actions[0].input: not valid JSON")

	j = sampleJob()
	j.Actions[0].Input = json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)
	_, err = record.NewJobRecord("jobs", j)
	require.Equal(t, record.ErrRecordTooLarge, record.TypeOf(err))

	j = sampleJob()
	j.Branch = ""
	rec, err := record.NewJobRecord("jobs", j)
	require.NoError(t, err)
	require.Contains(t, string(rec.Value), `"branch":"main"`)
}

func TestErrorTypes(t *testing.T) {
	t.Parallel()
	seen := map[record.ErrorType]bool{}
	for _, et := range record.ErrorTypes() {
		require.True(t, et.Valid())
		require.False(t, seen[et], et)
		seen[et] = true
		require.Regexp(t, `^[A-Z_]+$`, string(et))
	}
	require.False(t, record.ErrorType("OOPS").Valid())
	require.Equal(t, record.ErrUnclassified, record.TypeOf(bytes.ErrTooLarge))
}

func BenchmarkEncodeJob(b *testing.B) {
	j := sampleJob()
	b.ReportAllocs()
	buf := make([]byte, 0, 1024)
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = j.AppendJSON(buf[:0])
		}
	})
	b.Run("NewJobRecord", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := record.NewJobRecord("doclog.jobs", j); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(toJobJSON(j)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// jobJSON is the job as encoding/json would write it from struct tags, the
// reference the hand-written encoder is held to.
type jobJSON struct {
	Schema           string          `json:"schema"`
	JobID            string          `json:"jobId"`
	Kind             record.Kind     `json:"kind"`
	DocumentID       string          `json:"documentId"`
	DocumentType     string          `json:"documentType"`
	Branch           string          `json:"branch"`
	Actions          []oplog.Action  `json:"actions"`
	QueueHint        []string        `json:"queueHint,omitempty"`
	MaxRetries       *int            `json:"maxRetries,omitempty"`
	Meta             json.RawMessage `json:"meta,omitempty"`
	SubmittedAtUtcMs int64           `json:"submittedAtUtcMs,omitempty"`
}

func toJobJSON(j *record.Job) jobJSON {
	return jobJSON{record.SchemaJobV1, j.JobID, j.Kind, j.DocumentID, j.DocumentType, j.BranchOrDefault(), j.Actions, j.QueueHint, j.MaxRetries, j.Meta, j.SubmittedAtUtcMs}
}

func BenchmarkDecodeJob(b *testing.B) {
	rec, err := record.NewJobRecord("doclog.jobs", sampleJob())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := record.DecodeJob(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func TestJobOperationCount(t *testing.T) {
	t.Parallel()
	require.Equal(t, 3, (&record.Job{Kind: record.KindMutate, Actions: make([]oplog.Action, 3)}).OperationCount())
	require.Equal(t, 2, (&record.Job{Kind: record.KindLoad, Operations: make([]record.LoadOperation, 2)}).OperationCount())
	require.Equal(t, 1, (&record.Job{Kind: record.KindCreate}).OperationCount(), "a creation writes its system action")
	require.Equal(t, 1, (&record.Job{Kind: record.KindFork}).OperationCount())
}
