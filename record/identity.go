package record

import (
	"encoding/json"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadableIdentity reads what a job record that failed to decode still says
// of itself: its jobId, and the document it belongs to (its documentId, or
// the record key, by which jobs are keyed). ok is false unless the value is
// a JSON object whose jobId is a well-formed job id and a well-formed
// document id is found; the rest of the record may break the contract in
// any way. It lets a refused record give its producer a FAILED result
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
	if doc, _ := w.DocumentID.(string); checkName(doc) == "" {
		return id, doc, true
	}
	if key := string(rec.Key); checkName(key) == "" {
		return id, key, true
	}
	return "", "", false
}
