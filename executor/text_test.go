package executor_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// Job records produced straight to the topic with hostile text — a control
// character in a document id, an override in a scope, bytes that are not
// UTF-8, an unpaired surrogate escape, an escape sequence in a document's
// name — each end as a classified dead letter and a FAILED result that
// carries none of the characters, and the jobs behind them on the same
// partition complete.
func TestHostileTextIsDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	dlq := b.reader(b.kenv.Names.DeadLetters)
	b.start(b.config())

	create := createJob("doc-text", jsondoc.DocumentType)
	b.submit(create)
	raw := func(key, value string) *kgo.Record {
		return &kgo.Record{Topic: b.kenv.Names.Jobs, Key: []byte(key), Value: []byte(value)}
	}
	job := func(id, kind, doc, actions string) string {
		return `{"schema":"doclog.job.v1","jobId":"` + id + `","kind":"` + kind + `","documentId":"` + doc + `","documentType":"doclog/json","actions":[` + actions + `]}`
	}
	type refused struct {
		id        string
		record    *kgo.Record
		errorType record.ErrorType
		document  string // the document the FAILED result names
		reason    string
	}
	var cases []refused
	refuse := func(key, kind, doc, actions string, errorType record.ErrorType, document, reason string) {
		id := uuid.NewString()
		cases = append(cases, refused{id: id, record: raw(key, job(id, kind, doc, actions)), errorType: errorType, document: document, reason: reason})
	}
	refuse("doc\x1b]0;pwned\x07", "create", `doc\u001b]0;pwned\u0007`, "",
		record.ErrDecode, `doc\x1b]0;pwned\a`, "documentId: contains a control character (U+001B at byte 3)")
	refuse("doc-text", "mutate", "doc-text", `{"id":"a1","type":"MERGE_PATCH","scope":"glo`+"\u202e"+`bal","timestampUtcMs":1,"input":{}}`,
		record.ErrInvalidAction, "doc-text", "actions[0].scope: contains a bidirectional formatting character (U+202E at byte 3)")
	refuse("doc-\xff", "create", "doc-\xff", "",
		record.ErrDecode, `doc-\xff`, "record value is not valid UTF-8 (0xff at byte")
	refuse("doc-text", "create", `doc-text\ud800`, "",
		record.ErrDecode, "doc-text", `record value is not valid Unicode (\ud800 at byte`)
	for _, c := range cases {
		b.produce(c.record)
	}
	// A well-formed record whose SET_NAME the system reducer refuses.
	name := mutateJob("doc-text", jsondoc.DocumentType, action(oplog.ScopeDocument, model.ActionSetName, map[string]any{"name": "Q4\x1b[2J"}))
	later := patchJob("doc-text", 1)
	b.submit(name, later)

	all := []string{create.JobID, name.JobID, later.JobID}
	for _, c := range cases {
		all = append(all, c.id)
	}
	results := b.waitResults(all, 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, results[create.JobID].Status)
	require.Equal(t, oplog.JobWriteReady, results[later.JobID].Status, "the partition kept flowing")
	for _, c := range cases {
		r := results[c.id]
		require.Equal(t, oplog.JobFailed, r.Status, "job %s", c.id)
		require.Len(t, r.ErrorHistory, 1)
		require.Equal(t, record.ErrorName, r.ErrorHistory[0].Name)
		require.Contains(t, r.ErrorHistory[0].Message, c.reason)
		require.Equal(t, c.document, r.DocumentID, "the verdict carries no hostile text")
	}
	r := results[name.JobID]
	require.Equal(t, oplog.JobFailed, r.Status)
	last := r.ErrorHistory[len(r.ErrorHistory)-1]
	require.Equal(t, model.NameInvalidInput, last.Name)
	require.Contains(t, last.Message, "name contains a control character (U+001B at byte 2)")
	// Nothing of the refused jobs was applied: doc-text holds its create
	// and the later patch, and no document was made of the hostile ids.
	b.checkDocument("doc-text", jsondoc.DocumentType, []string{later.JobID})
	for _, doc := range []string{"doc\x1b]0;pwned\x07", "doc-\ufffd", "doc-text\ufffd"} {
		require.Empty(t, b.readAll(oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}))
	}

	letters := dlq.deadLetters(30*time.Second, 5, func(d *record.DeadLetter) string {
		if d.Job != nil {
			return d.Job.JobID
		}
		for _, c := range cases {
			if bytes.Contains(d.Undecodable.Value, []byte(c.id)) {
				return c.id
			}
		}
		return ""
	})
	for _, c := range cases {
		d := letters[c.id]
		require.NotNil(t, d, "a dead letter for %s", c.reason)
		require.Equal(t, c.errorType, d.ErrorType)
		require.Contains(t, d.Undecodable.Reason, c.reason)
		require.Equal(t, c.record.Value, d.Undecodable.Value, "the raw record is kept as it was")
		require.Equal(t, strings.ToValidUTF8(string(c.record.Key), "\ufffd"), d.Source.Key, "the key as text")
	}
	require.Equal(t, record.ErrInvalidAction, letters[name.JobID].ErrorType)
	require.Contains(t, letters[name.JobID].Error.Message, "name contains a control character")
}
