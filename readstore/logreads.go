package readstore

import (
	"context"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// operationsBody is the answer of GET /v1/documents/{id}/operations.
type operationsBody struct {
	DocumentID string `json:"documentId"`
	Scope      string `json:"scope"`
	Branch     string `json:"branch"`
	// Revision is the stream's revision when it was read.
	Revision   int64             `json:"revision"`
	Operations []oplog.Operation `json:"operations"`
	// NextSince is the ?since= of the next page, absent on the last one.
	NextSince *int64 `json:"nextSince,omitempty"`
}

// logStream waits for the request's consistency token on the log, then
// reads the document's revisions, answering 404 for a document with no
// operation on the branch. It returns the stream the request reads and its
// revision.
func (h *Handler) logStream(r *http.Request, q query, scope string) (oplog.StreamKey, int64, *APIError) {
	k := oplog.StreamKey{DocumentID: r.PathValue("id"), Scope: scope, Branch: q.branch}
	if apiErr := h.consistency(r, q, SourceLog); apiErr != nil {
		return k, 0, apiErr
	}
	revs, err := h.log.Revisions(r.Context(), k.DocumentID, k.Branch)
	if err != nil {
		return k, 0, internal("read the revisions of "+k.DocumentID, err)
	}
	if len(revs.Revision) == 0 {
		return k, 0, &APIError{Status: http.StatusNotFound, Code: CodeDocumentNotFound, Field: "id",
			Message: "id: the log holds no document " + quote(k.DocumentID) + " on branch " + k.Branch}
	}
	if apiErr := h.branchDeleted(r.Context(), k.DocumentID, k.Branch); apiErr != nil {
		return k, 0, apiErr
	}
	return k, revs.Revision[scope], nil
}

func (h *Handler) operations(w http.ResponseWriter, r *http.Request) *APIError {
	q, scope, apiErr := parseStreamQuery(r, "since", "limit")
	if apiErr != nil {
		return apiErr
	}
	since, apiErr := q.int64Param("since", 0, 0)
	if apiErr != nil {
		return apiErr
	}
	limit, apiErr := h.limit(q)
	if apiErr != nil {
		return apiErr
	}
	stream, head, apiErr := h.logStream(r, q, scope)
	if apiErr != nil {
		return apiErr
	}
	ops, err := h.log.ReadStream(r.Context(), stream, since, limit)
	if err != nil {
		return internal("read "+stream.String(), err)
	}
	body := operationsBody{DocumentID: stream.DocumentID, Scope: scope, Branch: stream.Branch, Revision: head, Operations: ops}
	if body.Operations == nil {
		body.Operations = []oplog.Operation{}
	}
	if len(ops) > 0 {
		next := ops[len(ops)-1].Index + 1
		// The revision was read before the page: a stream that grew in
		// between is reported at least as far as the page reached.
		body.Revision = max(body.Revision, next)
		if next < body.Revision {
			body.NextSince = &next
		}
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// stateBody is the answer of GET /v1/documents/{id}/state.
type stateBody struct {
	DocumentID   string `json:"documentId"`
	DocumentType string `json:"documentType"`
	Scope        string `json:"scope"`
	Branch       string `json:"branch"`
	Revision     int64  `json:"revision"`
	Version      int    `json:"version"`
	Hash         string `json:"hash"`
	State        any    `json:"state"`
	// KeyframeIndex is the index of the keyframe the state was rebuilt
	// from, absent when it was replayed from index 0.
	KeyframeIndex *int64 `json:"keyframeIndex,omitempty"`
	// Replayed is the number of operations replayed (each hash checked).
	Replayed int64 `json:"replayedOperations"`
}

func (h *Handler) stateAt(w http.ResponseWriter, r *http.Request) *APIError {
	q, scope, apiErr := parseStreamQuery(r, "revision")
	if apiErr != nil {
		return apiErr
	}
	revision, apiErr := q.int64Param("revision", 1, 0)
	if apiErr != nil {
		return apiErr
	}
	stream, head, apiErr := h.logStream(r, q, scope)
	if apiErr != nil {
		return apiErr
	}
	if revision == 0 {
		revision = head
	}
	if head == 0 {
		return &APIError{Status: http.StatusNotFound, Code: CodeRevisionNotFound, Field: "revision",
			Message: fmt.Sprintf("revision: scope %s of %s has no operations", scope, stream.DocumentID)}
	}
	if revision > head {
		return &APIError{Status: http.StatusNotFound, Code: CodeRevisionNotFound, Field: "revision",
			Message: fmt.Sprintf("revision: scope %s of %s has revision %d; ask for 1 to %d", scope, stream.DocumentID, head, head)}
	}
	res, err := h.rebuild(r.Context(), stream, revision)
	if err != nil {
		if model.ErrorName(err) != "" {
			return &APIError{Status: http.StatusInternalServerError, Code: CodeReplayFailed, Cause: err,
				Message: fmt.Sprintf("replaying %s to revision %d does not reproduce the log: %v", stream, revision, err)}
		}
		return internal(fmt.Sprintf("rebuild %s at revision %d", stream, revision), err)
	}
	st := res.State
	body := stateBody{
		DocumentID: stream.DocumentID, DocumentType: st.DocumentType, Scope: scope, Branch: stream.Branch, Revision: st.Revision,
		Version: st.Version, Hash: st.Hash, State: st.State, Replayed: res.Replayed,
	}
	if res.Keyframe >= 0 {
		body.KeyframeIndex = &res.Keyframe
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// replayPage bounds one read of the log while rebuilding.
const replayPage = 1000

// rebuild returns the state of a stream after its first revision operations
// (model.StateAt: from the nearest keyframe at or below it, its hash checked
// on load, plus the operations after it, each replayed with its hash
// checked; from index 0 when there is no usable keyframe or an operation's
// skip reaches before it). The read store never writes a keyframe: that is
// the executor's.
func (h *Handler) rebuild(ctx context.Context, stream oplog.StreamKey, revision int64) (model.Rebuilt, error) {
	res, err := h.registry.StateAt(ctx, h.log, stream, "", revision, replayPage)
	if res.BadKeyframe != nil {
		h.logger.Warn("keyframe does not match its hash; replaying from index 0",
			zap.String("stream", stream.String()), zap.Int64("index", res.BadKeyframeIndex), zap.Error(res.BadKeyframe))
	}
	if err != nil {
		return res, err
	}
	if st := res.State; st.Revision < revision {
		// The revision was checked against the stream's before the read.
		return res, fmt.Errorf("read %s from index %d: the log has no operation there", stream, st.Revision)
	}
	return res, nil
}
