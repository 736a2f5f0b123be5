package ctlcli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

func TestDLQ(t *testing.T) {
	t.Parallel()
	env := testenv.Kafka(t)
	topics := env.CreateTopics()
	args := []string{"--kafka-seeds", strings.Join(env.Config.Seeds, ","), "--topics-prefix", env.Topics.Prefix}
	ctx := context.Background()
	cl := env.Client()

	job := &record.Job{
		JobID: "0193a000-0000-7000-8000-0000000000d1", Kind: record.KindMutate, DocumentID: "doc-1",
		DocumentType: "doclog/ledger", Branch: oplog.DefaultBranch,
		Actions: []oplog.Action{{ID: "a1", Type: "WITHDRAW", Scope: oplog.ScopeGlobal, Input: json.RawMessage(`{"accountId":"x","amount":5}`)}},
	}
	dl := &record.DeadLetter{
		Job: job, Error: oplog.ErrorInfo{Name: "BusinessRuleViolation", Message: "overdraft"},
		ErrorType: record.ErrReducer, Attempts: 1, FailedAt: time.Now().UTC(),
		Source: record.Source{Topic: topics.Jobs, Partition: 0, Offset: 7, Key: "doc-1"},
	}
	rec, err := record.NewDeadLetterRecord(topics.DeadLetters, dl)
	require.NoError(t, err)
	garbage := record.NewUndecodableDeadLetter(&kgo.Record{Topic: topics.Jobs, Key: []byte("doc-2"), Value: []byte("{nope")},
		&record.DecodeError{Reason: "malformed JSON", Type: record.ErrDecode}, time.Now())
	rec2, err := record.NewDeadLetterRecord(topics.DeadLetters, garbage)
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, rec, rec2).FirstErr())

	code, out, errOut := ctl(t, append([]string{"dlq", "list", "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	var entries []struct {
		Partition  int32              `json:"partition"`
		Offset     int64              `json:"offset"`
		DeadLetter *record.DeadLetter `json:"deadLetter"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &entries))
	require.Len(t, entries, 2)
	require.Equal(t, job.JobID, entries[0].DeadLetter.Job.JobID)
	require.Nil(t, entries[1].DeadLetter.Job)

	code, out, _ = ctl(t, append([]string{"dlq", "show", "0:0"}, args...)...)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "overdraft")
	code, _, _ = ctl(t, append([]string{"dlq", "show", "0:99"}, args...)...)
	require.Equal(t, exitFailed, code)
	code, _, _ = ctl(t, append([]string{"dlq", "show", "zero"}, args...)...)
	require.Equal(t, exitUsage, code)

	// Redrive both: the job becomes a new job, the undecodable one cannot.
	code, out, _ = ctl(t, append([]string{"dlq", "redrive", "--all", "-o", "json"}, args...)...)
	require.Equal(t, exitProblems, code, "one of two could not be redriven")
	var rows []struct {
		NewJobID string `json:"newJobId"`
		Error    string `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.NotEmpty(t, rows[0].NewJobID)
	require.NotEqual(t, job.JobID, rows[0].NewJobID, "a redrive is a new job")
	require.Contains(t, rows[1].Error, "no decodable job")

	consumer := env.Client(kgo.ConsumeTopics(topics.Jobs), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got *record.Job
	for got == nil {
		fs := consumer.PollFetches(fctx)
		require.NoError(t, fctx.Err())
		fs.EachRecord(func(r *kgo.Record) {
			j, err := record.DecodeJob(r)
			require.NoError(t, err)
			got = j
		})
	}
	require.Equal(t, rows[0].NewJobID, got.JobID)
	require.Equal(t, job.DocumentID, got.DocumentID)
	require.Equal(t, job.Actions[0].Type, got.Actions[0].Type)

	code, _, errOut = ctl(t, append([]string{"dlq", "purge"}, args...)...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--yes")
	code, out, _ = ctl(t, append([]string{"dlq", "purge", "--yes", "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, `"purged": 2`)
	code, out, _ = ctl(t, append([]string{"dlq", "list", "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code)
	require.JSONEq(t, `[]`, out)
}

func TestJobsSubmit(t *testing.T) {
	t.Parallel()
	env := testenv.Kafka(t)
	topics := env.CreateTopics()
	args := []string{"--kafka-seeds", strings.Join(env.Config.Seeds, ","), "--topics-prefix", env.Topics.Prefix}

	code, out, errOut := ctl(t, append([]string{"jobs", "submit", "--document-id", "doc-9", "--type", "doclog/json",
		"--actions", `[{"type":"MERGE_PATCH","scope":"global","input":{"a":1}}]`, "--idempotency-key", "k-1", "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	var res oplog.JobResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, oplog.JobPending, res.Status)
	require.Equal(t, model.JobIDFromIdempotencyKey("k-1"), res.JobID, "the idempotency key fixes the job id")

	code, _, errOut = ctl(t, append([]string{"jobs", "submit", "--document-id", "doc-9"}, args...)...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--type")
	code, _, errOut = ctl(t, append([]string{"jobs", "submit", "--document-id", "doc-9", "--type", "doclog/json", "--kind", "explode"}, args...)...)
	require.Equal(t, exitUsage, code, "the record contract refuses an unknown kind")
	require.Contains(t, errOut, "kind")

	consumer := env.Client(kgo.ConsumeTopics(topics.Jobs), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got *record.Job
	for got == nil {
		fs := consumer.PollFetches(fctx)
		require.NoError(t, fctx.Err())
		fs.EachRecord(func(r *kgo.Record) {
			j, err := record.DecodeJob(r)
			require.NoError(t, err)
			got = j
		})
	}
	require.Equal(t, res.JobID, got.JobID)
	require.Equal(t, "doc-9", got.DocumentID)
	require.Equal(t, res.JobID+":0", got.Actions[0].ID, "an action without id gets one from the job")
	require.JSONEq(t, `{"a":1}`, string(got.Actions[0].Input))
}
