package record_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// The contract is stated three times: docs/records.md's examples, the JSON
// Schemas in docs/schemas, and this package. These tests hold them to each
// other.

var schemaFiles = map[string]string{
	record.SchemaJobV1:        "job.v1.schema.json",
	record.SchemaWriteReadyV1: "write-ready.v1.schema.json",
	record.SchemaDeadLetterV1: "dead-letter.v1.schema.json",
}

type docExample struct {
	schema string
	value  []byte
}

var exampleRE = regexp.MustCompile("(?s)<!-- example ([a-z.-]+v[0-9]+) -->\\s*```json\\n(.*?)```")

func extractExamples(tb testing.TB, md []byte) []docExample {
	tb.Helper()
	var out []docExample
	for _, m := range exampleRE.FindAllSubmatch(md, -1) {
		out = append(out, docExample{schema: string(m[1]), value: bytes.TrimSpace(m[2])})
	}
	return out
}

func compileSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	for version, file := range schemaFiles {
		f, err := os.Open(filepath.Join("..", "docs", "schemas", file))
		require.NoError(t, err)
		doc, err := jsonschema.UnmarshalJSON(f)
		require.NoError(t, f.Close())
		require.NoError(t, err, file)
		id, _ := doc.(map[string]any)["$id"].(string)
		require.Equal(t, "urn:doclog:schema:"+version, id, file)
		require.NoError(t, c.AddResource(id, doc))
	}
	out := map[string]*jsonschema.Schema{}
	for version := range schemaFiles {
		sch, err := c.Compile("urn:doclog:schema:" + version)
		require.NoError(t, err, version)
		out[version] = sch
	}
	return out
}

func validateAgainst(t *testing.T, sch *jsonschema.Schema, value []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	require.NoError(t, err)
	return sch.Validate(inst)
}

func decodeAny(schema string, value []byte) error {
	var err error
	switch schema {
	case record.SchemaJobV1:
		_, err = record.ParseJob(value)
	case record.SchemaWriteReadyV1:
		_, err = record.ParseWriteReady(value)
	case record.SchemaDeadLetterV1:
		_, err = record.ParseDeadLetter(value)
	}
	return err
}

func TestDocExamplesMatchSchemasAndDecoders(t *testing.T) {
	t.Parallel()
	schemas := compileSchemas(t)
	md, err := os.ReadFile(filepath.Join("..", "docs", "records.md"))
	require.NoError(t, err)
	examples := extractExamples(t, md)
	perSchema := map[string]int{}
	for i, ex := range examples {
		sch, ok := schemas[ex.schema]
		require.True(t, ok, "example %d names unknown schema %s", i, ex.schema)
		require.NoError(t, validateAgainst(t, sch, ex.value), "example %d (%s)", i, ex.schema)
		require.NoError(t, decodeAny(ex.schema, ex.value), "example %d (%s)", i, ex.schema)
		var header struct{ Schema string }
		require.NoError(t, json.Unmarshal(ex.value, &header))
		require.Equal(t, ex.schema, header.Schema, "example %d is labelled as its schema field says", i)
		perSchema[ex.schema]++
	}
	for version := range schemaFiles {
		require.GreaterOrEqual(t, perSchema[version], 2, "docs/records.md shows %s", version)
	}
	for _, et := range record.ErrorTypes() {
		require.Contains(t, string(md), "| `"+string(et)+"` |", "docs/records.md documents errorType %s", et)
	}
}

func TestEncodersMatchSchemas(t *testing.T) {
	t.Parallel()
	schemas := compileSchemas(t)
	check := func(name string, rec *kgo.Record) {
		t.Helper()
		version := record.SchemaOf(rec)
		require.NoError(t, validateAgainst(t, schemas[version], rec.Value), "%s: %s", name, rec.Value)
	}

	job, err := record.NewJobRecord("jobs", sampleJob())
	require.NoError(t, err)
	check("full job", job)
	minimal := &record.Job{JobID: jobID, Kind: record.KindDelete, DocumentID: "d", DocumentType: "t"}
	rec, err := record.NewJobRecord("jobs", minimal)
	require.NoError(t, err)
	check("minimal job", rec)

	rec, err = record.NewWriteReadyRecord("wr", sampleWriteReady(), 0)
	require.NoError(t, err)
	check("write-ready with operations", rec)
	rec, err = record.NewWriteReadyRecord("wr", sampleWriteReady(), 100)
	require.NoError(t, err)
	require.Contains(t, string(rec.Value), `"operationsOmitted":true`)
	check("write-ready without operations", rec)

	rec, err = record.NewDeadLetterRecord("dl", &record.DeadLetter{
		Job: sampleJob(), Error: oplog.ErrorInfo{Name: "ReducerPanic", Message: "index out of range", Cause: &oplog.ErrorInfo{Name: "runtime.Error"}},
		ErrorType: record.ErrReducerPanic, Attempts: 1, Source: record.SourceOf(job), FailedAt: failedAt,
	})
	require.NoError(t, err)
	check("dead letter of a job", rec)
	bad := &kgo.Record{Topic: "jobs", Key: []byte("k"), Value: []byte("\x00\x01not json")}
	_, decodeErr := record.DecodeJob(bad)
	rec, err = record.NewDeadLetterRecord("dl", record.NewUndecodableDeadLetter(bad, decodeErr, failedAt))
	require.NoError(t, err)
	check("dead letter of an undecodable record", rec)
}

// TestSchemasRejectWhatDecodersReject checks, for contract breaches a JSON
// Schema can express, that the schema and the decoder agree.
func TestSchemasRejectWhatDecodersReject(t *testing.T) {
	t.Parallel()
	schemas := compileSchemas(t)
	job := string(sampleJob().AppendJSON(nil))
	wr := string(sampleWriteReady().AppendJSON(nil, false))
	for _, tc := range []struct{ name, schema, value string }{
		{"unknown field", record.SchemaJobV1, strings.Replace(job, `"kind"`, `"kin"`, 1)},
		{"other version", record.SchemaJobV1, strings.Replace(job, "doclog.job.v1", "doclog.job.v2", 1)},
		{"bad kind", record.SchemaJobV1, strings.Replace(job, `"mutate"`, `"update"`, 1)},
		{"job id not a uuid", record.SchemaJobV1, strings.Replace(job, jobID, "J1", 1)},
		{"action without scope", record.SchemaJobV1, strings.Replace(job, `"scope":"global",`, "", 1)},
		{"action without id", record.SchemaJobV1, strings.Replace(job, `"id":"a-1",`, "", 1)},
		{"action with empty type", record.SchemaJobV1, strings.Replace(job, `"ADD_ENTRY"`, `""`, 1)},
		{"negative retries", record.SchemaJobV1, strings.Replace(job, `"maxRetries":3`, `"maxRetries":-3`, 1)},
		{"meta is a string", record.SchemaJobV1, strings.Replace(job, `{"traceId":"abc"}`, `"abc"`, 1)},
		{"mutate without actions", record.SchemaJobV1, `{"schema":"doclog.job.v1","jobId":"` + jobID + `","kind":"mutate","documentId":"d","documentType":"t","actions":[]}`},
		{"no streams", record.SchemaWriteReadyV1, strings.Replace(wr, wr[strings.Index(wr, `"streams":[`)+10:strings.Index(wr, `,"consistencyToken"`)], "[]", 1)},
		{"operations and omitted", record.SchemaWriteReadyV1, strings.Replace(wr, `"operations":[`, `"operationsOmitted":true,"operations":[`, 1)},
		{"unknown operation field", record.SchemaWriteReadyV1, strings.Replace(wr, `"skip":0`, `"skip":0,"x":1`, 1)},
		{"escape in document id", record.SchemaJobV1, strings.Replace(job, `"documentId":"`+docID, `"documentId":"`+docID+`\u001b[2J`, 1)},
		{"DEL in action scope", record.SchemaJobV1, strings.Replace(job, `"scope":"global"`, "\"scope\":\"glo\x7fbal\"", 1)},
		{"C1 in action id", record.SchemaJobV1, strings.Replace(job, `"id":"a-1"`, "\"id\":\"a-1\u009b\"", 1)},
		{"override in branch", record.SchemaJobV1, strings.Replace(job, `"branch":"main"`, "\"branch\":\"\u202emain\"", 1)},
		{"bell in write-ready document type", record.SchemaWriteReadyV1, strings.Replace(wr, `"documentType":"doclog/ledger"`, `"documentType":"doclog/ledger\u0007"`, 1)},
		{"isolate in stream scope", record.SchemaWriteReadyV1, strings.Replace(wr, `"scope":"global"`, "\"scope\":\"global\u2066\"", 1)},
	} {
		require.Error(t, validateAgainst(t, schemas[tc.schema], []byte(tc.value)), "schema accepts %s", tc.name)
		require.Error(t, decodeAny(tc.schema, []byte(tc.value)), "decoder accepts %s", tc.name)
	}
}

// TestNamePatternIsTheTextRule holds the "name" pattern of the job and
// write-ready schemas to oplog.IsUnsafeRune, rune by rune over all of
// Unicode, so the schemas refuse exactly the characters the decoders do.
func TestNamePatternIsTheTextRule(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"job.v1.schema.json", "write-ready.v1.schema.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "docs", "schemas", file))
		require.NoError(t, err)
		var doc struct {
			Defs struct {
				Name struct {
					Pattern string `json:"pattern"`
				} `json:"name"`
			} `json:"$defs"`
		}
		require.NoError(t, json.Unmarshal(raw, &doc))
		require.NotEmpty(t, doc.Defs.Name.Pattern, "%s: $defs.name has a pattern", file)
		require.False(t, bytes.ContainsFunc(raw, func(r rune) bool { return r != '\n' && oplog.IsUnsafeRune(r) }),
			"%s: the pattern names its characters with JSON escapes, so the file shows them", file)
		re, err := regexp.Compile(doc.Defs.Name.Pattern)
		require.NoError(t, err, file)
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if r >= 0xd800 && r <= 0xdfff {
				continue // not characters; JSON text cannot hold them alone
			}
			s := "a" + string(r) + "b"
			require.Equal(t, !oplog.IsUnsafeRune(r), re.MatchString(s), "%s: U+%04X", file, r)
		}
	}
}
