package readstore

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// documentBody is the answer of GET /v1/documents/{idOrSlug}: the header
// and the state of each scope.
type documentBody struct {
	ID                string               `json:"id"`
	Branch            string               `json:"branch"`
	DocumentType      string               `json:"documentType"`
	Name              string               `json:"name"`
	Slug              string               `json:"slug"`
	Version           int                  `json:"version"`
	CreatedAtUtcMs    int64                `json:"createdAtUtcMs"`
	LastModifiedUtcMs int64                `json:"lastModifiedUtcMs"`
	IsDeleted         bool                 `json:"isDeleted"`
	DeletedAtUtcMs    *int64               `json:"deletedAtUtcMs,omitempty"`
	Revision          map[string]int64     `json:"revision"`
	Scopes            map[string]scopeBody `json:"scopes"`
}

type scopeBody struct {
	Revision int64           `json:"revision"`
	Hash     string          `json:"hash"`
	Version  int             `json:"version"`
	State    json.RawMessage `json:"state"`
}

func (h *Handler) getDocument(w http.ResponseWriter, r *http.Request) *APIError {
	q, apiErr := parseQuery(r, "scope")
	if apiErr != nil {
		return apiErr
	}
	branch := q.branch
	// ?scope= picks scopes: one name or a comma-separated list.
	var scopes []string
	if q.v.Has("scope") {
		for s := range strings.SplitSeq(q.get("scope"), ",") {
			if _, apiErr := checkName("scope", s); apiErr != nil {
				return apiErr
			}
			scopes = append(scopes, s)
		}
	}
	if apiErr := h.consistency(r, q, SourceDocView); apiErr != nil {
		return apiErr
	}
	key := r.PathValue("idOrSlug")
	doc, err := h.store.Document(r.Context(), key, branch)
	var nf *NotFoundError
	if errors.As(err, &nf) {
		// Not an id: try it as a slug (ids and slugs share the path).
		doc, err = h.store.DocumentBySlug(r.Context(), key, branch)
	}
	if errors.As(err, &nf) {
		return &APIError{Status: http.StatusNotFound, Code: CodeDocumentNotFound, Field: "idOrSlug",
			Message: "idOrSlug: no document has id or slug " + quote(key) + " on branch " + branch}
	}
	if err != nil {
		return internal("read document "+key, err)
	}
	if apiErr := h.branchDeleted(r.Context(), doc.ID, branch); apiErr != nil {
		return apiErr
	}
	body := documentBody{
		ID: doc.ID, Branch: doc.Branch, DocumentType: doc.DocumentType, Name: doc.Name, Slug: doc.Slug,
		Version: doc.Version, CreatedAtUtcMs: doc.CreatedAtUtcMs, LastModifiedUtcMs: doc.LastModifiedUtcMs,
		IsDeleted: doc.IsDeleted, Revision: map[string]int64{}, Scopes: map[string]scopeBody{},
	}
	if doc.IsDeleted {
		body.DeletedAtUtcMs = &doc.DeletedAtUtcMs
	}
	for name, s := range doc.Scopes {
		body.Revision[name] = s.LastIndex + 1
		if scopes == nil || slices.Contains(scopes, name) {
			body.Scopes[name] = scopeBody{Revision: s.LastIndex + 1, Hash: s.Hash, Version: s.Version, State: s.State}
		}
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// foundBody is the answer of GET /v1/documents.
type foundBody struct {
	Documents  []foundDocument `json:"documents"`
	NextCursor string          `json:"nextCursor,omitempty"`
}

type foundDocument struct {
	ID             string `json:"id"`
	DocumentType   string `json:"documentType,omitempty"`
	CreatedAtUtcMs int64  `json:"createdAtUtcMs,omitempty"`
	IsDeleted      bool   `json:"isDeleted"`
	DeletedAtUtcMs *int64 `json:"deletedAtUtcMs,omitempty"`
	// Revision is the revision of the document scope the index applied,
	// 0 for a child the index has not seen created.
	Revision int64 `json:"revision"`
}

// The cursor is the key of a page's last row (an id; for relationships the
// JSON array [source, type, target]), base64url-encoded: opaque to
// clients, stable under concurrent writes (paging is by id in code-point
// order, so a document created between two pages appears in the later one
// exactly when its id sorts after the cursor).
func encodeCursor(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func decodeCursor(s string) (string, *APIError) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil || len(b) == 0 || !utf8.Valid(b) {
		return "", paramError("cursor", "not a cursor this API returned")
	}
	return string(b), nil
}

func (h *Handler) findDocuments(w http.ResponseWriter, r *http.Request) *APIError {
	q, apiErr := parseQuery(r, "type", "parent", "cursor", "limit", "includeDeleted")
	if apiErr != nil {
		return apiErr
	}
	fq := FindQuery{Branch: q.branch}
	if q.v.Has("type") {
		if fq.Type, apiErr = checkName("type", q.get("type")); apiErr != nil {
			return apiErr
		}
	}
	if q.v.Has("parent") {
		if fq.Parent, apiErr = checkName("parent", q.get("parent")); apiErr != nil {
			return apiErr
		}
	}
	if q.v.Has("cursor") {
		if fq.After, apiErr = decodeCursor(q.get("cursor")); apiErr != nil {
			return apiErr
		}
	}
	if fq.Limit, apiErr = h.limit(q); apiErr != nil {
		return apiErr
	}
	if q.v.Has("includeDeleted") {
		switch v := q.get("includeDeleted"); v {
		case "false":
		case "true":
			fq.IncludeDeleted = true
		default:
			return paramError("includeDeleted", "%q is not true or false", v)
		}
	}
	if apiErr := h.consistency(r, q, SourceIndexer); apiErr != nil {
		return apiErr
	}
	docs, err := h.store.FindDocuments(r.Context(), fq)
	if err != nil {
		return internal("find documents", err)
	}
	body := foundBody{Documents: make([]foundDocument, 0, min(len(docs), fq.Limit))}
	for i, d := range docs {
		if i == fq.Limit {
			body.NextCursor = encodeCursor(docs[i-1].ID)
			break
		}
		fd := foundDocument{ID: d.ID, DocumentType: d.DocumentType, CreatedAtUtcMs: d.CreatedAtUtcMs, IsDeleted: d.IsDeleted, Revision: d.LastIndex + 1}
		if d.IsDeleted {
			fd.DeletedAtUtcMs = &d.DeletedAtUtcMs
		}
		body.Documents = append(body.Documents, fd)
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// relationshipsBody is the answer of GET /v1/documents/{id}/relationships.
type relationshipsBody struct {
	DocumentID    string             `json:"documentId"`
	Branch        string             `json:"branch"`
	Direction     Direction          `json:"direction"`
	Relationships []relationshipBody `json:"relationships"`
	NextCursor    string             `json:"nextCursor,omitempty"`
}

type relationshipBody struct {
	SourceID   string          `json:"sourceId"`
	Type       string          `json:"type"`
	TargetID   string          `json:"targetId"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	SinceIndex int64           `json:"sinceIndex"`
}

func (h *Handler) relationships(w http.ResponseWriter, r *http.Request) *APIError {
	q, apiErr := parseQuery(r, "direction", "type", "cursor", "limit")
	if apiErr != nil {
		return apiErr
	}
	rq := RelationshipQuery{DocumentID: r.PathValue("id"), Branch: q.branch, Direction: DirectionBoth}
	if q.v.Has("direction") {
		switch d := Direction(q.get("direction")); d {
		case DirectionIn, DirectionOut, DirectionBoth:
			rq.Direction = d
		default:
			return paramError("direction", "%q is not in, out or both", q.get("direction"))
		}
	}
	if q.v.Has("type") {
		if rq.Type, apiErr = checkName("type", q.get("type")); apiErr != nil {
			return apiErr
		}
	}
	if q.v.Has("cursor") {
		raw, apiErr := decodeCursor(q.get("cursor"))
		if apiErr != nil {
			return apiErr
		}
		var key [3]string
		if json.Unmarshal([]byte(raw), &key) != nil {
			return paramError("cursor", "not a cursor this API returned")
		}
		rq.After = &Relationship{SourceID: key[0], Type: key[1], TargetID: key[2]}
	}
	if rq.Limit, apiErr = h.limit(q); apiErr != nil {
		return apiErr
	}
	if apiErr := h.consistency(r, q, SourceIndexer); apiErr != nil {
		return apiErr
	}
	if _, err := h.store.IndexedDocument(r.Context(), rq.DocumentID, rq.Branch); err != nil {
		if errors.As(err, new(*NotFoundError)) {
			return &APIError{Status: http.StatusNotFound, Code: CodeDocumentNotFound, Field: "id",
				Message: "id: the relationship index holds no document " + quote(rq.DocumentID) + " on branch " + rq.Branch}
		}
		return internal("read document "+rq.DocumentID, err)
	}
	if apiErr := h.branchDeleted(r.Context(), rq.DocumentID, rq.Branch); apiErr != nil {
		return apiErr
	}
	rels, err := h.store.Relationships(r.Context(), rq)
	if err != nil {
		return internal("read relationships of "+rq.DocumentID, err)
	}
	body := relationshipsBody{DocumentID: rq.DocumentID, Branch: rq.Branch, Direction: rq.Direction,
		Relationships: make([]relationshipBody, 0, min(len(rels), rq.Limit))}
	for i, rel := range rels {
		if i == rq.Limit {
			last := rels[i-1]
			key, _ := json.Marshal([3]string{last.SourceID, last.Type, last.TargetID})
			body.NextCursor = encodeCursor(string(key))
			break
		}
		body.Relationships = append(body.Relationships, relationshipBody{
			SourceID: rel.SourceID, Type: rel.Type, TargetID: rel.TargetID, Metadata: rel.Metadata, SinceIndex: rel.SinceIndex,
		})
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}
