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
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/record"
)

// pwn retitles the terminal (OSC 0, ended by BEL) and clears it (CSI 2J);
// the rest are a carriage return, DEL, a C1 CSI and a right-to-left override.
const pwn = "\x1b]0;pwned\x07\x1b[2J\r\x7f\u009b\u202e"

// requireInert checks that out holds none of pwn's characters raw.
func requireInert(t *testing.T, what, out string) {
	t.Helper()
	for _, c := range []string{"\x1b", "\x07", "\r", "\x7f", "\u009b", "\u202e"} {
		require.NotContains(t, out, c, "%s prints %q raw:\n%s", what, c, out)
	}
}

// A dead letter and a job result are producers' text: printed by the real
// commands, as a table or as JSON, they cannot drive the operator's
// terminal, and the JSON still says exactly what was stored.
func TestPrintedTextCannotDriveTheTerminal(t *testing.T) {
	t.Parallel()
	env := testenv.Kafka(t)
	topics := env.CreateTopics()
	kafkaArgs := []string{"--kafka-seeds", strings.Join(env.Config.Seeds, ","), "--topics-prefix", env.Topics.Prefix}
	ctx := context.Background()

	// Written before ingest refused hostile text, or straight to a topic.
	undecodable := record.NewUndecodableDeadLetter(&kgo.Record{Topic: topics.Jobs, Key: []byte("doc" + pwn), Value: []byte("{nope" + pwn)},
		&record.DecodeError{Reason: "malformed JSON" + pwn, Type: record.ErrDecode}, time.Now())
	failed := &record.DeadLetter{
		Job: &record.Job{JobID: "0193a000-0000-7000-8000-0000000000e1", Kind: record.KindCreate, DocumentID: "doc-e",
			DocumentType: "doclog/json", Branch: oplog.DefaultBranch, Actions: []oplog.Action{}},
		Error: oplog.ErrorInfo{Name: "BusinessRuleViolation", Message: "overdraft" + pwn}, ErrorType: record.ErrReducer,
		Attempts: 1, FailedAt: time.Now().UTC(), Source: record.Source{Topic: topics.Jobs, Key: "doc-e"},
	}
	var recs []*kgo.Record
	for _, dl := range []*record.DeadLetter{undecodable, failed} {
		rec, err := record.NewDeadLetterRecord(topics.DeadLetters, dl)
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	require.NoError(t, env.Client().ProduceSync(ctx, recs...).FirstErr())

	code, out, errOut := ctl(t, append([]string{"dlq", "list"}, kafkaArgs...)...)
	require.Equal(t, exitOK, code, errOut)
	requireInert(t, "dlq list", out)
	require.Contains(t, out, `doc\x1b]0;pwned\a\x1b[2J\r\x7f\u009b\u202e`, "the key, escaped")
	require.Contains(t, out, `overdraft\x1b]0;pwned\a`, "the error, escaped")

	code, out, errOut = ctl(t, append([]string{"dlq", "list", "-o", "json"}, kafkaArgs...)...)
	require.Equal(t, exitOK, code, errOut)
	requireInert(t, "dlq list -o json", out)
	var entries []struct {
		DeadLetter *record.DeadLetter `json:"deadLetter"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &entries))
	require.Len(t, entries, 2)
	require.Equal(t, "doc"+pwn, entries[0].DeadLetter.Source.Key, "JSON escapes, it does not alter")
	require.Equal(t, "overdraft"+pwn, entries[1].DeadLetter.Error.Message)

	code, out, errOut = ctl(t, append([]string{"dlq", "show", "0:0"}, kafkaArgs...)...)
	require.Equal(t, exitOK, code, errOut)
	requireInert(t, "dlq show", out)

	// A FAILED job result, stored as an older executor stored it.
	url := migrated(t)
	store, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	defer store.Close()
	jobID := "0193a000-0000-7000-8000-0000000000e2"
	res, err := store.Append(ctx, []oplog.AppendRequest{{DocumentID: "doc" + pwn, DocumentType: "doclog/json",
		Jobs: []oplog.JobOutcome{{JobID: jobID, Status: oplog.JobFailed, ErrorHistory: []oplog.ErrorInfo{{Name: "InvalidInput", Message: "bad" + pwn}}}}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	// An id that is not a job id is refused, escaped.
	code, _, errOut = ctl(t, "jobs", "get", jobID, "x"+pwn, "--database-url", url)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `"x\x1b]0;pwned\a`)
	requireInert(t, "a refused id", errOut)

	for _, output := range []string{"table", "json"} {
		code, out, errOut = ctl(t, "jobs", "get", jobID, "-o", output, "--database-url", url)
		require.Equal(t, exitOK, code, errOut)
		requireInert(t, "jobs get -o "+output, out)
		if output == "table" {
			require.Contains(t, out, `doc\x1b]0;pwned\a`)
			require.Contains(t, out, `bad\x1b]0;pwned\a`)
			continue
		}
		var jobs []jobStatus
		require.NoError(t, json.Unmarshal([]byte(out), &jobs))
		require.Equal(t, "doc"+pwn, jobs[0].DocumentID)
		require.Equal(t, "bad"+pwn, (*jobs[0].ErrorHistory)[0].Message)
	}

	// An error that quotes its argument is escaped too.
	code, _, errOut = ctl(t, "docs", "get", "doc"+pwn, "--database-url", url)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, `doc\x1b]0;pwned\a`)
	requireInert(t, "an error", errOut)
}
