package record_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/record"
)

// TestPlainProducerJobs writes job records with Kafka's own console producer,
// a client that shares no code with doclog, to the real test broker, and
// decodes what arrives: the contract in docs/records.md is enough to produce
// jobs. An undecodable record from the same producer becomes a dead letter
// that round-trips through its own topic.
func TestPlainProducerJobs(t *testing.T) {
	t.Parallel()
	env := testenv.Kafka(t)
	libs := testenv.KafkaLibs(t)
	jobs, deadLetters := env.Topic("jobs"), env.Topic("dead-letters")
	cl := env.Client(kgo.ConsumeTopics(jobs, deadLetters), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	createTopics(ctx, t, kadm.NewClient(cl), nil, jobs, deadLetters)

	jobJSON := `{"schema":"doclog.job.v1","jobId":"` + jobID + `","kind":"create","documentId":"doc-raw","documentType":"doclog/ledger","actions":[{"id":"a1","type":"SET_NAME","scope":"document","timestampUtcMs":1764460800000,"input":{"name":"raw"}}]}`
	lines := "doclog-schema:doclog.job.v1\tdoc-raw\t" + jobJSON + "\n" +
		"doclog-schema:doclog.job.v1\tdoc-bad\tthis is not json\n"
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-cp", filepath.Join(libs, "*"),
		"org.apache.kafka.tools.ConsoleProducer",
		"--bootstrap-server", strings.Join(env.Config.Seeds, ","), "--topic", jobs,
		"--command-property", "acks=all",
		"--reader-property", "parse.key=true", "--reader-property", "parse.headers=true")
	cmd.Stdin = strings.NewReader(lines)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "console producer: %s", out)

	recs := poll(ctx, t, cl, jobs, 2)
	job, err := record.DecodeJob(recs[0])
	require.NoError(t, err)
	require.Equal(t, "doc-raw", job.DocumentID)
	require.Equal(t, "main", job.Branch)
	require.JSONEq(t, `{"name":"raw"}`, string(job.Actions[0].Input))
	require.Equal(t, record.SchemaJobV1, record.SchemaOf(recs[0]))

	_, err = record.DecodeJob(recs[1])
	require.Equal(t, record.ErrDecode, record.TypeOf(err))
	require.ErrorContains(t, err, "malformed JSON at byte 2: invalid character")
	dl, err := record.NewDeadLetterRecord(deadLetters, record.NewUndecodableDeadLetter(recs[1], err, time.Now()))
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, dl).FirstErr())
	got := poll(ctx, t, cl, deadLetters, 1)
	letter, err := record.DecodeDeadLetter(got[0])
	require.NoError(t, err)
	require.Equal(t, []byte("this is not json"), letter.Undecodable.Value)
	require.Equal(t, record.Source{Topic: jobs, Partition: 0, Offset: 1, Key: "doc-bad"}, letter.Source)
}

// TestOversizedJobFromPlainClient writes a job record above the decoder's
// bound straight to a topic that accepts it, and checks it is classified as
// RECORD_TOO_LARGE with a dead letter that still fits a default topic.
func TestOversizedJobFromPlainClient(t *testing.T) {
	t.Parallel()
	env := testenv.Kafka(t)
	topic := env.Topic("jobs")
	cl := env.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ProducerBatchMaxBytes(4<<20), kgo.MaxBufferedBytes(16<<20))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	createTopics(ctx, t, kadm.NewClient(cl), map[string]*string{"max.message.bytes": kadm.StringPtr(fmt.Sprint(4 << 20))}, topic)

	j := sampleJob()
	j.Actions[0].Input = []byte(`"` + strings.Repeat("x", 3<<19) + `"`)
	value := j.AppendJSON(nil)
	require.Greater(t, len(value), record.DefaultMaxSize)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(docID), Value: value}).FirstErr())

	recs := poll(ctx, t, cl, topic, 1)
	_, err := record.DecodeJob(recs[0])
	require.Equal(t, record.ErrRecordTooLarge, record.TypeOf(err))
	dl, err := record.NewDeadLetterRecord("dl", record.NewUndecodableDeadLetter(recs[0], err, time.Now()))
	require.NoError(t, err)
	require.Less(t, len(dl.Value), 1<<20)
	require.True(t, bytes.Contains(dl.Value, []byte(`"truncated":true`)))
}

func createTopics(ctx context.Context, t *testing.T, adm *kadm.Client, configs map[string]*string, topics ...string) {
	t.Helper()
	resp, err := adm.CreateTopics(ctx, 1, 1, configs, topics...)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
}

// poll consumes until it has n records of topic.
func poll(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, n int) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "waiting for %d records on %s, have %d", n, topic, len(recs))
		for _, e := range fs.Errors() {
			// A topic just created may briefly be unknown to the fetcher.
			t.Logf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == topic {
				recs = append(recs, r)
			}
		})
	}
	return recs
}
