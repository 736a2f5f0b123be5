package record_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/record"
)

func TestWriteReadyRoundTrip(t *testing.T) {
	t.Parallel()
	w := sampleWriteReady()
	rec, err := record.NewWriteReadyRecord("doclog.write-ready", w, 0)
	require.NoError(t, err)
	require.Equal(t, []byte(docID), rec.Key)
	require.Equal(t, record.SchemaWriteReadyV1, record.SchemaOf(rec))
	got, err := record.DecodeWriteReady(rec)
	require.NoError(t, err)
	require.Equal(t, w, got)
}

// TestWriteReadyOperationsMatchEncodingJSON holds the operation encoder to
// encoding/json's output for oplog.Operation's struct tags.
func TestWriteReadyOperationsMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	w := sampleWriteReady()
	w.Operations[1].Ordinal, w.Operations[1].TxID = 0, 0
	w.Operations[1].WrittenAt = w.Operations[1].WrittenAt.In(time.FixedZone("", 5*3600+1800))
	w.Operations[1].Action.Input = nil
	value := w.AppendJSON(nil, false)

	var generic map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(value, &generic))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(w.Operations))
	require.Equal(t, strings.TrimSuffix(buf.String(), "\n"), string(generic["operations"]))

	buf.Reset()
	require.NoError(t, enc.Encode(w.Streams))
	require.Equal(t, strings.TrimSuffix(buf.String(), "\n"), string(generic["streams"]))
	buf.Reset()
	require.NoError(t, enc.Encode(w.ConsistencyToken))
	require.Equal(t, strings.TrimSuffix(buf.String(), "\n"), string(generic["consistencyToken"]))
}

func TestWriteReadyOmitsLargeOperations(t *testing.T) {
	t.Parallel()
	w := sampleWriteReady()
	w.Operations[0].Action.Input = json.RawMessage(`"` + strings.Repeat("x", 4000) + `"`)
	rec, err := record.NewWriteReadyRecord("wr", w, 2048)
	require.NoError(t, err)
	require.Less(t, len(rec.Value), 2048)
	require.NotNil(t, w.Operations, "the caller's record is not changed")

	got, err := record.DecodeWriteReady(rec)
	require.NoError(t, err)
	require.True(t, got.OperationsOmitted)
	require.Empty(t, got.Operations)
	require.Equal(t, w.Streams, got.Streams, "ranges and hashes stay when operations are left out")
	require.Equal(t, w.ConsistencyToken, got.ConsistencyToken)

	rec, err = record.NewWriteReadyRecord("wr", w, 0)
	require.NoError(t, err)
	got, err = record.DecodeWriteReady(rec)
	require.NoError(t, err)
	require.False(t, got.OperationsOmitted)
	require.Len(t, got.Operations, 2)
}

func TestWriteReadyValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(w *record.WriteReady)
		want   string
	}{
		{"no streams", func(w *record.WriteReady) { w.Streams = nil }, "streams: a committed job wrote at least one stream"},
		{"hash count", func(w *record.WriteReady) { w.Streams[0].Hashes = nil }, "streams[0].hashes: 0 hashes for the 1 operations of 4..4"},
		{"inverted range", func(w *record.WriteReady) { w.Streams[0].FromIndex = 5 }, "streams[0]: index range 5..4 is empty or negative"},
		{"stream of another document", func(w *record.WriteReady) { w.Streams[1].Stream.DocumentID = "x" }, `streams[1].stream.documentId: "x" is not the record's document`},
		{"token off the range", func(w *record.WriteReady) { w.ConsistencyToken.Coordinates[0].Index = 3 }, "consistencyToken.coordinates[0]: doc-7f3a/global/main at index 3 is not the last index"},
		{"missing operation", func(w *record.WriteReady) { w.Operations = w.Operations[:1] }, "operations: 1 operations for index ranges that cover 2"},
		{"operation of another job", func(w *record.WriteReady) { w.Operations[0].JobID = jobID2 }, "operations[0].jobId"},
		{"operation hash differs", func(w *record.WriteReady) { w.Operations[1].Hash = "zz" }, "operations[1].hash: differs from the stream's hash at index 7"},
		{"operation outside range", func(w *record.WriteReady) { w.Operations[1].Index = 8 }, "operations[1].index: 8 is outside 7..7"},
		{"operation without action id", func(w *record.WriteReady) { w.Operations[0].Action.ID = "" }, "action has no id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := sampleWriteReady()
			tc.mutate(w)
			_, err := record.NewWriteReadyRecord("wr", w, 0)
			require.ErrorContains(t, err, tc.want)

			// The decoder applies the same contract.
			_, err = record.ParseWriteReady(w.AppendJSON(nil, false))
			var de *record.DecodeError
			require.ErrorAs(t, err, &de)
			require.Contains(t, de.Reason, strings.SplitN(tc.want, ":", 2)[0])
		})
	}
}

func TestDecodeWriteReadyErrors(t *testing.T) {
	t.Parallel()
	rec, err := record.NewWriteReadyRecord("wr", sampleWriteReady(), 0)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		value  string
		header string
		want   string
	}{
		{"job record on the wrong topic", string(sampleJob().AppendJSON(nil)), "", `unknown field "kind"`},
		{"job header", string(rec.Value), record.SchemaJobV1, `doclog-schema header: "doclog.job.v1" is not a doclog.write-ready.v1 record`},
		{"omitted with operations", strings.Replace(string(rec.Value), `"operations":[`, `"operationsOmitted":true,"operations":[`, 1), "", "operations: present although operationsOmitted is set"},
		{"operations missing", string(rec.Value[:strings.Index(string(rec.Value), `,"operations":[`)]) + `,"writtenAtUtcMs":1}`, "", "operations: 0 operations for index ranges that cover 2"},
		{"unknown operation field", strings.Replace(string(rec.Value), `"skip":0`, `"skip":0,"extra":1`, 1), "", `unknown field "extra"`},
	} {
		r := &kgo.Record{Key: rec.Key, Value: []byte(tc.value)}
		if tc.header != "" {
			r.Headers = []kgo.RecordHeader{{Key: record.HeaderSchema, Value: []byte(tc.header)}}
		}
		_, err := record.DecodeWriteReady(r)
		require.ErrorContains(t, err, tc.want, tc.name)
		require.Equal(t, record.ErrDecode, record.TypeOf(err), tc.name)
	}
}

func BenchmarkEncodeWriteReady(b *testing.B) {
	w := sampleWriteReady()
	buf := make([]byte, 0, 4096)
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = w.AppendJSON(buf[:0], false)
		}
	})
	b.Run("NewWriteReadyRecord", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := record.NewWriteReadyRecord("wr", w, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json operations", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(w.Operations); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDecodeWriteReady(b *testing.B) {
	rec, err := record.NewWriteReadyRecord("wr", sampleWriteReady(), 0)
	require.NoError(b, err)
	b.SetBytes(int64(len(rec.Value)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := record.DecodeWriteReady(rec); err != nil {
			b.Fatal(err)
		}
	}
}
