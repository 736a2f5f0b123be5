package record_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

var failedAt = time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC)

func TestDeadLetterOfJobRoundTrip(t *testing.T) {
	t.Parallel()
	d := &record.DeadLetter{
		Job:       sampleJob(),
		Error:     oplog.ErrorInfo{Name: "ReducerError", Message: "amount must be positive", Cause: &oplog.ErrorInfo{Name: "RangeError", Message: "-3 < 0"}},
		ErrorType: record.ErrReducer,
		Attempts:  1,
		Source:    record.Source{Topic: "doclog.jobs", Partition: 3, Offset: 812, Key: docID},
		FailedAt:  failedAt,
	}
	rec, err := record.NewDeadLetterRecord("doclog.dead-letters", d)
	require.NoError(t, err)
	require.Equal(t, []byte(docID), rec.Key)
	require.Equal(t, record.SchemaDeadLetterV1, record.SchemaOf(rec))
	require.True(t, bytes.HasPrefix(rec.Value, []byte(`{"schema":"doclog.dead-letter.v1","job":{"schema":"doclog.job.v1",`)), string(rec.Value))

	got, err := record.DecodeDeadLetter(rec)
	require.NoError(t, err)
	require.Equal(t, d, got)
}

func TestDeadLetterOfUndecodableRecord(t *testing.T) {
	t.Parallel()
	src := &kgo.Record{Topic: "doclog.jobs", Partition: 1, Offset: 42, Key: []byte("doc-1"), Value: []byte(`{"schema":"doclog.job.v1","jobId":`)}
	_, decodeErr := record.DecodeJob(src)
	require.Error(t, decodeErr)

	d := record.NewUndecodableDeadLetter(src, decodeErr, failedAt)
	require.Equal(t, record.ErrDecode, d.ErrorType)
	require.Equal(t, record.ErrorName, d.Error.Name)
	require.Equal(t, "malformed JSON: unexpected end of the record value", d.Undecodable.Reason)
	rec, err := record.NewDeadLetterRecord("doclog.dead-letters", d)
	require.NoError(t, err)
	require.Equal(t, []byte("doc-1"), rec.Key)
	require.Contains(t, string(rec.Value), `"undecodable":{"value":"eyJzY2hlbWEiOiJkb2Nsb2cuam9iLnYxIiwiam9iSWQiOg==","size":34,"reason":"malformed JSON: unexpected end of the record value"}`)

	got, err := record.DecodeDeadLetter(rec)
	require.NoError(t, err)
	require.Equal(t, d, got)
	require.Equal(t, src.Value, got.Undecodable.Value)
	require.Equal(t, record.Source{Topic: "doclog.jobs", Partition: 1, Offset: 42, Key: "doc-1"}, got.Source)
}

func TestDeadLetterOfOversizedRecord(t *testing.T) {
	t.Parallel()
	src := &kgo.Record{Topic: "doclog.jobs", Key: []byte("doc-1"), Value: bytes.Repeat([]byte("x"), 2<<20)}
	_, decodeErr := record.DecodeJob(src)
	d := record.NewUndecodableDeadLetter(src, decodeErr, failedAt)
	require.Equal(t, record.ErrRecordTooLarge, d.ErrorType)
	require.True(t, d.Undecodable.Truncated)
	require.Equal(t, 2<<20, d.Undecodable.Size)
	require.Len(t, d.Undecodable.Value, record.MaxRawValueBytes)
	rec, err := record.NewDeadLetterRecord("dl", d)
	require.NoError(t, err)
	require.Less(t, len(rec.Value), 100<<10, "the dead letter of an oversized record fits the topic")
}

func TestDeadLetterValidate(t *testing.T) {
	t.Parallel()
	valid := func() *record.DeadLetter {
		return &record.DeadLetter{
			Job: sampleJob(), Error: oplog.ErrorInfo{Name: "Timeout", Message: "dependency did not complete"},
			ErrorType: record.ErrTimeout, Attempts: 2, Source: record.Source{Topic: "jobs", Key: docID}, FailedAt: failedAt,
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(d *record.DeadLetter)
		want   string
	}{
		{"neither job nor raw", func(d *record.DeadLetter) { d.Job = nil }, "job: exactly one of job and undecodable must be set"},
		{"both", func(d *record.DeadLetter) { d.Undecodable = &record.Undecodable{Reason: "x"} }, "exactly one of job and undecodable"},
		{"no error name", func(d *record.DeadLetter) { d.Error.Name = "" }, "error.name: missing"},
		{"unknown error type", func(d *record.DeadLetter) { d.ErrorType = "OOPS" }, `errorType: "OOPS" is not one of the dead-letter error types`},
		{"nameless cause", func(d *record.DeadLetter) { d.Error.Cause = &oplog.ErrorInfo{Message: "m"} }, "error.cause: a cause at depth 1 has no name"},
		{"no topic", func(d *record.DeadLetter) { d.Source.Topic = "" }, "source.topic: missing"},
		{"no time", func(d *record.DeadLetter) { d.FailedAt = time.Time{} }, "failedAt: missing"},
		{"invalid job", func(d *record.DeadLetter) { d.Job.Kind = "x" }, `job: invalid doclog.job.v1 record: kind: "x" is not one of`},
	} {
		d := valid()
		tc.mutate(d)
		_, err := record.NewDeadLetterRecord("dl", d)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

func TestDecodeDeadLetterErrors(t *testing.T) {
	t.Parallel()
	d := &record.DeadLetter{
		Job: sampleJob(), Error: oplog.ErrorInfo{Name: "X", Message: "y"}, ErrorType: record.ErrUnclassified,
		Source: record.Source{Topic: "jobs", Key: docID}, FailedAt: failedAt,
	}
	rec, err := record.NewDeadLetterRecord("dl", d)
	require.NoError(t, err)
	v := string(rec.Value)
	for _, tc := range []struct{ name, value, want string }{
		{"nested job breaks its contract", strings.Replace(v, `"id":"a-1"`, `"id":""`, 1), "job: actions[0].id: missing"},
		{"nested job of a future version", strings.Replace(v, `"schema":"doclog.job.v1"`, `"schema":"doclog.job.v2"`, 1), `job: schema: unsupported schema version "doclog.job.v2"`},
		{"unknown error type", strings.Replace(v, `"UNCLASSIFIED"`, `"NOPE"`, 1), `errorType: "NOPE"`},
		{"unknown field", strings.Replace(v, `"attempts"`, `"attempt"`, 1), `unknown field "attempt"`},
		{"bad time", strings.Replace(v, `"2026-11-30T12:00:01Z"`, `"yesterday"`, 1), `cannot parse "yesterday"`},
	} {
		_, err := record.ParseDeadLetter([]byte(tc.value))
		var de *record.DecodeError
		require.ErrorAs(t, err, &de, tc.name)
		require.Equal(t, record.SchemaDeadLetterV1, de.Schema, tc.name)
		require.Contains(t, de.Reason, tc.want, tc.name)
	}
}
