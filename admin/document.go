package admin

import (
	"context"
	"encoding/json"
	"fmt"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// ScopeState is one scope of a document as the log replays it.
type ScopeState struct {
	Revision int64           `json:"revision"`
	Hash     string          `json:"hash"`
	Version  int             `json:"version"`
	State    json.RawMessage `json:"state"`
}

// Document is a document rebuilt from the log.
type Document struct {
	ID             string                `json:"id"`
	DocumentType   string                `json:"documentType"`
	Branch         string                `json:"branch"`
	Name           string                `json:"name,omitempty"`
	Slug           string                `json:"slug,omitempty"`
	Version        int                   `json:"version"`
	CreatedAtUtcMs int64                 `json:"createdAtUtcMs"`
	LastModifiedMs int64                 `json:"lastModifiedUtcMs"`
	IsDeleted      bool                  `json:"isDeleted"`
	DeletedAtUtcMs int64                 `json:"deletedAtUtcMs,omitempty"`
	Scopes         map[string]ScopeState `json:"scopes"`
	Relationships  []model.Relationship  `json:"relationships,omitempty"`
}

// GetDocument rebuilds a document from the log by replaying every stream,
// which also proves every stored hash. It answers from the source of truth,
// not from a projection, so it works when projectors lag or are down.
func GetDocument(ctx context.Context, store oplog.Store, reg *model.Registry, documentID, branch string) (Document, error) {
	revs, err := store.Revisions(ctx, documentID, branch)
	if err != nil {
		return Document{}, fmt.Errorf("reading document %s: %w", documentID, err)
	}
	if len(revs.Revision) == 0 {
		return Document{}, fmt.Errorf("reading document %s on %s: %w", documentID, branch, ErrDocumentNotFound)
	}
	doc := Document{ID: documentID, Branch: branch, LastModifiedMs: revs.LatestTimestamp, Scopes: map[string]ScopeState{}}
	for _, scope := range sortedScopes(revs.Revision) {
		k := oplog.StreamKey{DocumentID: documentID, Scope: scope, Branch: branch}
		ops, err := store.ReadStream(ctx, k, 0, 0)
		if err != nil {
			return Document{}, fmt.Errorf("reading document %s: %w", documentID, err)
		}
		st, err := reg.ReplayStream(k, ops[0].DocumentType, ops)
		if err != nil {
			return Document{}, fmt.Errorf("replaying %s: %w", k, err)
		}
		state, err := model.Canonical(st.State)
		if err != nil {
			return Document{}, fmt.Errorf("encoding state of %s: %w", k, err)
		}
		doc.Scopes[scope] = ScopeState{Revision: st.Revision, Hash: st.Hash, Version: st.Version, State: state}
		if scope == oplog.ScopeDocument {
			info, _ := model.DocumentInfoOf(st)
			doc.DocumentType, doc.Name, doc.Slug, doc.Version = info.DocumentType, info.Name, info.Slug, info.Version
			doc.CreatedAtUtcMs, doc.IsDeleted, doc.DeletedAtUtcMs = info.CreatedAtUtcMs, info.IsDeleted, info.DeletedAtUtcMs
			doc.Relationships = info.Relationships
		}
		if doc.DocumentType == "" {
			doc.DocumentType = ops[0].DocumentType
		}
	}
	return doc, nil
}
