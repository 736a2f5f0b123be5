package record

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/internal/jsonvalue"
	oplog "github.com/doclog/doclog/log"
)

// ReadableIdentity reads what a job record that failed to decode still says
// of itself: its jobId, and the document it belongs to (its documentId, or
// the record key, by which jobs are keyed). ok is false unless the value is
// a JSON object whose jobId is a well-formed job id and a document id is
// found (in text the contract accepts, or else escaped with
// oplog.EscapeText); the rest of the record may break the contract in any
// way. It lets a refused record give its producer a FAILED result
// instead of leaving its job PENDING.
func ReadableIdentity(rec *kgo.Record) (jobID, documentID string, ok bool) {
	var w struct {
		JobID      any `json:"jobId"`
		DocumentID any `json:"documentId"`
	}
	// Lenient on purpose: unknown fields and wrong types elsewhere are why
	// the record was refused, and say nothing about its identity.
	if err := json.Unmarshal(rec.Value, &w); err != nil {
		return "", "", false
	}
	id, _ := w.JobID.(string)
	if checkUUID(id) != "" {
		return "", "", false
	}
	doc, _ := w.DocumentID.(string)
	if jsonvalue.CheckText(rec.Value) != nil {
		// The lenient decoder turned what is not Unicode into U+FFFD, so
		// the decoded id may be another document's; the key keeps the
		// bytes.
		doc = ""
	}
	candidates := []string{doc, string(rec.Key)}
	for _, c := range candidates {
		if checkName(c) == "" {
			return id, c, true
		}
	}
	// A document id in text the contract refuses still tells the producer
	// which job failed; the verdict names it escaped, so the job result
	// never carries the characters the record was refused for.
	for _, c := range candidates {
		if checkShape(c) == "" {
			return id, oplog.EscapeText(c), true
		}
	}
	return "", "", false
}

// Unresolved is what a job id alone says of a job that has no result.
type Unresolved int

const (
	// MalformedJobID: never an id ingest or a producer could have used.
	MalformedJobID Unresolved = iota
	// ExpiredJobID: a UUIDv7 made longer ago than the jobs topic's
	// retention, so its record expired unread and it will never have a
	// result.
	ExpiredJobID
	// PendingJobID: it may still get a result.
	PendingJobID
)

// ClassifyUnresolved applies the rule for a job with no result, which the
// ingest API and doclogctl share: a job id is a UUID in canonical lowercase
// form, so anything else is malformed. A UUIDv7 carries the time it was
// made; once that is older than retention (the jobs topic's) the job has
// expired. Any other well-formed id — a UUIDv7 within retention, the UUIDv5
// of an idempotency key, a direct producer's own UUID — may belong to a job
// still on the topic, so it is pending. A negative retention expires none.
func ClassifyUnresolved(id string, retention time.Duration, now time.Time) Unresolved {
	if checkUUID(id) != "" {
		return MalformedJobID
	}
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || retention < 0 {
		return PendingJobID
	}
	sec, nsec := u.Time().UnixTime()
	if now.Sub(time.Unix(sec, nsec)) > retention {
		return ExpiredJobID
	}
	return PendingJobID
}
