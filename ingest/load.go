package ingest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/doclog/doclog/internal/jsonvalue"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// loadBody is the body of POST /v1/documents/{id}/load: operations another
// replica stored, to be placed by timestamp (a load job).
type loadBody struct {
	DocumentType string            `json:"documentType"`
	Branch       *string           `json:"branch"`
	Operations   []json.RawMessage `json:"operations"`
	QueueHint    []string          `json:"queueHint"`
	MaxRetries   *int              `json:"maxRetries"`
	Meta         json.RawMessage   `json:"meta"`
}

// loadOperationBody is one operation of a load as a client sends it.
type loadOperationBody struct {
	OpID   string          `json:"opId"`
	Index  *int64          `json:"index"`
	Skip   *int64          `json:"skip"`
	Hash   string          `json:"hash"`
	Action json.RawMessage `json:"action"`
}

func (h *Handler) loadDocument(w http.ResponseWriter, r *http.Request) {
	var b loadBody
	id, _, ok := h.decodeRequest(w, r, &b)
	if !ok {
		return
	}
	h.submit(w, r, id, &submission{
		kind: record.KindLoad, nowMs: time.Now().UnixMilli(), documentID: r.PathValue("id"), documentType: b.DocumentType, branch: b.Branch,
		operations: b.Operations, queueHint: b.QueueHint, maxRetries: b.MaxRetries, meta: b.Meta,
	})
}

// buildLoad builds a load job: every operation's identity, position and hash
// are required as the origin stored them, and its action is checked against
// the model as an ordinary job's would be (its type, scope and input), with
// its id and timestamp required too.
func (v *validator) buildLoad(s *submission, m model.Model, jobID string) (*record.Job, *APIError) {
	unprocessable := func(field, format string, args ...any) *APIError {
		return fieldError(http.StatusUnprocessableEntity, CodeInvalidField, field, format, args...)
	}
	if len(s.operations) == 0 {
		return nil, unprocessable("operations", "required: a load needs at least one operation")
	}
	if len(s.operations) > record.MaxLoadOperations {
		return nil, fieldError(http.StatusRequestEntityTooLarge, CodeTooManyActions, "operations",
			"%d operations, more than the %d a load may carry", len(s.operations), record.MaxLoadOperations)
	}
	j := &record.Job{
		JobID: jobID, Kind: record.KindLoad, DocumentID: s.documentID, DocumentType: s.documentType, Branch: oplog.DefaultBranch,
		Actions: []oplog.Action{}, QueueHint: s.queueHint, MaxRetries: s.maxRetries, Meta: jsonvalue.NullAsAbsent(s.meta),
		SubmittedAtUtcMs: s.nowMs,
	}
	if s.branch != nil {
		j.Branch = *s.branch
	}
	if len(j.Meta) > 0 && !isObject(j.Meta) {
		return nil, unprocessable("meta", "must be a JSON object")
	}
	for i, raw := range s.operations {
		field := "operations[" + strconv.Itoa(i) + "]"
		var ob loadOperationBody
		if e := decodeStrict(raw, &ob, field); e != nil {
			return nil, e
		}
		for _, f := range []struct {
			name    string
			missing bool
		}{{"opId", ob.OpID == ""}, {"index", ob.Index == nil}, {"skip", ob.Skip == nil}, {"hash", ob.Hash == ""}, {"action", len(ob.Action) == 0}} {
			if f.missing {
				return nil, unprocessable(field+"."+f.name, "required")
			}
		}
		for _, f := range []struct{ name, v string }{{"opId", ob.OpID}, {"hash", ob.Hash}} {
			if e := checkText(field+"."+f.name, f.v); e != nil {
				return nil, e
			}
		}
		var ids struct {
			ID             string `json:"id"`
			TimestampUtcMs *int64 `json:"timestampUtcMs"`
		}
		_ = json.Unmarshal(ob.Action, &ids) // decodeStrict in action reports a malformed one
		a, e := v.action(m, ob.Action, field+".action", jobID, i, s.nowMs, true)
		if e != nil {
			return nil, e
		}
		if ids.ID == "" {
			return nil, unprocessable(field+".action.id", "required: a loaded action keeps its origin's id")
		}
		if ids.TimestampUtcMs == nil {
			return nil, unprocessable(field+".action.timestampUtcMs", "required: placement orders by the origin's timestamp")
		}
		j.Operations = append(j.Operations, record.LoadOperation{OpID: ob.OpID, Index: *ob.Index, Skip: *ob.Skip, Hash: ob.Hash, Action: a})
	}
	return j, nil
}
