package record_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/record"
)

// FuzzDecodeJob feeds arbitrary values to the job decoder. It must never
// panic; whatever it rejects is a *DecodeError of a known type; whatever it
// accepts re-encodes to a record that decodes to the same job, so the
// decoder and the encoder agree on the contract.
func FuzzDecodeJob(f *testing.F) {
	f.Add(sampleJob().AppendJSON(nil))
	f.Add([]byte(`{"schema":"doclog.job.v1","jobId":"` + jobID + `","kind":"create","documentId":"d","documentType":"t","actions":[]}`))
	f.Add([]byte(`{"schema":"doclog.job.v1","jobId":"` + jobID + `","kind":"delete","documentId":"d","documentType":"t","branch":"b","actions":[],"meta":null}`))
	f.Add([]byte(`{"schema":"doclog.job.v2"}`))
	f.Add([]byte(`{"schema":"doclog.job.v1","actions":[{"id":"","type":"T","scope":"global","timestampUtcMs":1}]}`))
	f.Add([]byte(`{"schema":"doclog.job.v1","jobId":"` + jobID + `","kind":"mutate","documentId":"\u0000\ud800","documentType":"t","actions":[{"id":"a","type":"T","scope":"s","timestampUtcMs":1,"input":{"x":[1,2,{"y":null}]},"context":{}}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Add([]byte(`{"a":1} {"b":2}`))
	for _, ex := range docExamples(f, record.SchemaJobV1) {
		f.Add(ex)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		j, err := record.ParseJob(value)
		if err != nil {
			var de *record.DecodeError
			require.True(t, errors.As(err, &de), "%T: %v", err, err)
			require.True(t, de.Type.Valid(), de.Type)
			require.NotEmpty(t, de.Reason)
			return
		}
		rec, err := record.NewJobRecord("jobs", j)
		if err != nil {
			// Only the size bound may differ: compaction can't grow a value.
			require.Equal(t, record.ErrRecordTooLarge, record.TypeOf(err), err.Error())
			return
		}
		again, err := record.DecodeJob(rec)
		require.NoError(t, err, string(rec.Value))
		// Raw JSON (input, context, meta) is compacted on encoding, so the
		// first decode may differ in whitespace; from then on it is fixed.
		require.Equal(t, string(rec.Value), string(again.AppendJSON(nil)), "encoding is stable")
		require.Equal(t, j.JobID, again.JobID)
		require.Equal(t, j.DocumentID, again.DocumentID)
		require.Len(t, again.Actions, len(j.Actions))
		third, err := record.ParseJob(again.AppendJSON(nil))
		require.NoError(t, err)
		require.Equal(t, again, third)
	})
}

// docExamples returns the example records of a schema written in
// docs/records.md, extracted by the docs test.
func docExamples(tb testing.TB, schema string) [][]byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "records.md"))
	require.NoError(tb, err)
	var out [][]byte
	for _, ex := range extractExamples(tb, raw) {
		if ex.schema == schema {
			out = append(out, ex.value)
		}
	}
	return out
}
