package ingest

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/doclog/doclog/record"
)

// The branch routes submit branch jobs (fork, promote, delete-branch) to
// the jobs topic keyed by the document, like every job, so they take their
// place among the document's other jobs. Their outcome is the job's status:
// a promote whose target moved ends FAILED as BranchConflict.

// forkBody is the body of POST /v1/documents/{id}/branches.
type forkBody struct {
	DocumentType string            `json:"documentType"`
	From         *string           `json:"from"`
	Branch       string            `json:"branch"`
	At           map[string]*int64 `json:"at"`
	QueueHint    []string          `json:"queueHint"`
	MaxRetries   *int              `json:"maxRetries"`
	Meta         json.RawMessage   `json:"meta"`
}

// promoteBody is the body of POST /v1/documents/{id}/branches/{branch}/promote.
type promoteBody struct {
	DocumentType string            `json:"documentType"`
	Onto         string            `json:"onto"`
	ExpectedTip  map[string]*int64 `json:"expectedTip"`
	QueueHint    []string          `json:"queueHint"`
	MaxRetries   *int              `json:"maxRetries"`
	Meta         json.RawMessage   `json:"meta"`
}

func (h *Handler) forkBranch(w http.ResponseWriter, r *http.Request) {
	var b forkBody
	id, _, ok := h.decodeRequest(w, r, &b, "from")
	if !ok {
		return
	}
	if b.Branch == "" {
		h.refuse(w, r, fieldError(http.StatusUnprocessableEntity, CodeInvalidField, "branch", "required: the new branch's name"))
		return
	}
	at, e := points("at", b.At)
	if e != nil {
		h.refuse(w, r, e)
		return
	}
	h.submit(w, r, id, &submission{kind: record.KindFork, nowMs: time.Now().UnixMilli(), documentID: r.PathValue("id"),
		documentType: b.DocumentType, branch: b.From, queueHint: b.QueueHint, maxRetries: b.MaxRetries, meta: b.Meta,
		fork: &record.Fork{Branch: b.Branch, At: at}})
}

func (h *Handler) promoteBranch(w http.ResponseWriter, r *http.Request) {
	var b promoteBody
	id, _, ok := h.decodeRequest(w, r, &b)
	if !ok {
		return
	}
	switch {
	case b.Onto == "":
		h.refuse(w, r, fieldError(http.StatusUnprocessableEntity, CodeInvalidField, "onto", "required: the branch to promote onto"))
		return
	case b.ExpectedTip == nil:
		h.refuse(w, r, fieldError(http.StatusUnprocessableEntity, CodeInvalidField, "expectedTip",
			"required: the target's tip as last read (GET /v1/documents/{id}/branches on the read store), {} for an empty branch"))
		return
	}
	tip, e := points("expectedTip", b.ExpectedTip)
	if e != nil {
		h.refuse(w, r, e)
		return
	}
	branch := r.PathValue("branch")
	h.submit(w, r, id, &submission{kind: record.KindPromote, nowMs: time.Now().UnixMilli(), documentID: r.PathValue("id"),
		documentType: b.DocumentType, branch: &branch, queueHint: b.QueueHint, maxRetries: b.MaxRetries, meta: b.Meta,
		promote: &record.Promote{Onto: b.Onto, ExpectedTip: tip}})
}

// deleteBranch submits a delete-branch job; like a document's DELETE it
// takes the document's type as a query parameter.
func (h *Handler) deleteBranch(w http.ResponseWriter, r *http.Request) {
	q, id, ok := h.deleteRequest(w, r, "documentType")
	if !ok {
		return
	}
	branch := r.PathValue("branch")
	h.submit(w, r, id, &submission{kind: record.KindDeleteBranch, nowMs: time.Now().UnixMilli(), documentID: r.PathValue("id"),
		documentType: q.Get("documentType"), branch: &branch})
}

// points reads a scope → revision map, refusing a null revision (400, as
// every null where a value is required) or a negative one. A scope name is
// any string: one the document does not have fails the job.
func points(field string, m map[string]*int64) (map[string]int64, *APIError) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]int64, len(m))
	for _, s := range slices.Sorted(maps.Keys(m)) {
		switch v := m[s]; {
		case v == nil:
			return nil, fieldError(http.StatusBadRequest, CodeInvalidField, field, "the revision of scope %s is null", strconv.Quote(s))
		case *v < 0:
			return nil, fieldError(http.StatusUnprocessableEntity, CodeInvalidField, field, "the revision of scope %s is negative (%d)", strconv.Quote(s), *v)
		default:
			out[s] = *v
		}
	}
	return out, nil
}

// deleteRequest reads a DELETE's query, refusing a parameter not known, and
// assigns its job id; ok is false when the request was refused.
func (h *Handler) deleteRequest(w http.ResponseWriter, r *http.Request, known ...string) (q url.Values, id string, ok bool) {
	q = r.URL.Query()
	for name := range q {
		if !slices.Contains(known, name) {
			h.refuse(w, r, fieldError(http.StatusBadRequest, CodeInvalidField, name, "unknown query parameter (known: %s)", strings.Join(known, ", ")))
			return nil, "", false
		}
	}
	id, _, apiErr := jobID(r)
	if apiErr != nil {
		h.refuse(w, r, apiErr)
		return nil, "", false
	}
	return q, id, true
}
