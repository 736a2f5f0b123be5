package docview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
)

// Document is a document as the view holds it.
type Document struct {
	ID                string
	Branch            string
	DocumentType      string
	Name              string
	Slug              string
	Version           int
	CreatedAtUtcMs    int64
	LastModifiedUtcMs int64
	IsDeleted         bool
	DeletedAtUtcMs    int64
	// Revision is the revision (last index + 1) of each scope.
	Revision map[string]int64
	// Scopes is each scope's state and last operation.
	Scopes map[string]Scope
}

// Scope is one scope of a document.
type Scope struct {
	State     json.RawMessage
	LastIndex int64
	Hash      string
	Version   int
}

// NotFoundError reports a document (or slug) the view does not hold.
type NotFoundError struct {
	DocumentID string
	Slug       string
	Branch     string
}

func (e *NotFoundError) Error() string {
	if e.Slug != "" {
		return fmt.Sprintf("docview: no document holds slug %q on branch %s", e.Slug, e.Branch)
	}
	return fmt.Sprintf("docview: document %s not found on branch %s", e.DocumentID, e.Branch)
}

// View is the query side of the document view.
type View struct {
	pool  *pgxpool.Pool
	store projectors.Store
}

// NewView returns the view over pool; store answers quarantine status.
func NewView(pool *pgxpool.Pool, store projectors.Store) *View {
	return &View{pool: pool, store: store}
}

// Get returns a document by id, deleted ones included (IsDeleted set), or
// *NotFoundError.
func (v *View) Get(ctx context.Context, documentID, branch string) (*Document, error) {
	rows, err := v.pool.Query(ctx, `SELECT scope, document_type, model_version, state::text, last_index, last_hash, last_modified_utc_ms,
  name, slug, created_at_utc_ms, is_deleted, deleted_at_utc_ms
FROM document_snapshots WHERE document_id = $1 AND branch = $2`, documentID, branch)
	if err != nil {
		return nil, fmt.Errorf("docview: get %s: %w", documentID, err)
	}
	defer rows.Close()
	d := &Document{ID: documentID, Branch: branch, Revision: map[string]int64{}, Scopes: map[string]Scope{}}
	header := false
	for rows.Next() {
		var (
			scope, docType, state, hash string
			version                     int
			last, modified              int64
			name, slug                  *string
			created, deletedAt          *int64
			deleted                     bool
		)
		if err := rows.Scan(&scope, &docType, &version, &state, &last, &hash, &modified, &name, &slug, &created, &deleted, &deletedAt); err != nil {
			return nil, fmt.Errorf("docview: get %s: %w", documentID, err)
		}
		d.Scopes[scope] = Scope{State: json.RawMessage(state), LastIndex: last, Hash: hash, Version: version}
		d.Revision[scope] = last + 1
		d.DocumentType = docType
		d.LastModifiedUtcMs = max(d.LastModifiedUtcMs, modified)
		if scope == oplog.ScopeDocument {
			header = true
			d.Version = version
			d.Name, d.Slug, d.IsDeleted = deref(name), deref(slug), deleted
			d.CreatedAtUtcMs, d.DeletedAtUtcMs = derefInt(created), derefInt(deletedAt)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("docview: get %s: %w", documentID, err)
	}
	if !header {
		// Without its document scope a document has not been created (as
		// far as the view has reached).
		return nil, &NotFoundError{DocumentID: documentID, Branch: branch}
	}
	return d, nil
}

// GetBySlug returns the document holding slug, or *NotFoundError.
func (v *View) GetBySlug(ctx context.Context, slug, branch string) (*Document, error) {
	var id string
	err := v.pool.QueryRow(ctx, `SELECT document_id FROM slug_mappings WHERE slug = $1 AND branch = $2`, slug, branch).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Slug: slug, Branch: branch}
	}
	if err != nil {
		return nil, fmt.Errorf("docview: get by slug %q: %w", slug, err)
	}
	return v.Get(ctx, id, branch)
}

// AppliedIndexes returns the last applied index of each stream (-1 for a
// stream the view has not seen).
func (v *View) AppliedIndexes(ctx context.Context, streams []oplog.StreamKey) (map[oplog.StreamKey]int64, error) {
	out := make(map[oplog.StreamKey]int64, len(streams))
	d, s, b := make([]string, len(streams)), make([]string, len(streams)), make([]string, len(streams))
	for i, k := range streams {
		d[i], s[i], b[i] = k.DocumentID, k.Scope, k.Branch
		out[k] = -1
	}
	rows, err := v.pool.Query(ctx, `SELECT s.document_id, s.scope, s.branch, s.last_index
FROM unnest($1::text[], $2::text[], $3::text[]) AS k(d, s, b)
JOIN document_snapshots s ON s.document_id = k.d AND s.scope = k.s AND s.branch = k.b`, d, s, b)
	if err != nil {
		return nil, fmt.Errorf("docview: applied indexes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k oplog.StreamKey
		var i int64
		if err := rows.Scan(&k.DocumentID, &k.Scope, &k.Branch, &i); err != nil {
			return nil, fmt.Errorf("docview: applied indexes: %w", err)
		}
		out[k] = i
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("docview: applied indexes: %w", err)
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(i *int64) int64 {
	if i == nil {
		return 0
	}
	return *i
}
