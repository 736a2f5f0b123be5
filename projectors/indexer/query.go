package indexer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
)

// Document is a document as the index holds it.
type Document struct {
	ID             string
	Branch         string
	DocumentType   string
	CreatedAtUtcMs int64
	IsDeleted      bool
	DeletedAtUtcMs int64
	// LastIndex is the last applied index of its document scope.
	LastIndex int64
}

// Relationship is one link from Source to Target.
type Relationship struct {
	SourceID   string
	TargetID   string
	Branch     string
	Type       string
	Metadata   json.RawMessage
	SinceIndex int64 // the index in Source's document scope that added it
}

// DocumentPage is a page of documents and the cursor of the next ("" when
// there is none).
type DocumentPage struct {
	Documents []Document
	Next      string
}

// RelationshipPage is a page of relationships and the cursor of the next
// ("" when there is none).
type RelationshipPage struct {
	Relationships []Relationship
	Next          string
}

// Index is the query side of the relationship index.
type Index struct {
	pool  *pgxpool.Pool
	store projectors.Store
}

// NewIndex returns the index over pool; store answers quarantine status.
func NewIndex(pool *pgxpool.Pool, store projectors.Store) *Index {
	return &Index{pool: pool, store: store}
}

// DefaultPageSize is the page size when a query asks for 0 or less.
const DefaultPageSize = 100

func pageSize(limit int) int {
	if limit <= 0 {
		return DefaultPageSize
	}
	return limit
}

// FindByType pages the live documents of a type in id order, after cursor.
func (x *Index) FindByType(ctx context.Context, documentType, branch, cursor string, limit int) (DocumentPage, error) {
	limit = pageSize(limit)
	rows, err := x.pool.Query(ctx, `SELECT document_id, branch, document_type, created_at_utc_ms, is_deleted, coalesce(deleted_at_utc_ms, 0), last_index
FROM documents WHERE document_type = $1 AND branch = $2 AND document_id > $3 AND NOT is_deleted
ORDER BY document_id LIMIT $4`, documentType, branch, cursor, limit+1)
	if err != nil {
		return DocumentPage{}, fmt.Errorf("indexer: find documents of type %s: %w", documentType, err)
	}
	docs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Document, error) {
		var d Document
		err := r.Scan(&d.ID, &d.Branch, &d.DocumentType, &d.CreatedAtUtcMs, &d.IsDeleted, &d.DeletedAtUtcMs, &d.LastIndex)
		return d, err
	})
	if err != nil {
		return DocumentPage{}, fmt.Errorf("indexer: find documents of type %s: %w", documentType, err)
	}
	page := DocumentPage{Documents: docs}
	if len(docs) > limit {
		page.Documents = docs[:limit]
		page.Next = docs[limit-1].ID
	}
	return page, nil
}

// Get returns a document of the index and whether it has one.
func (x *Index) Get(ctx context.Context, documentID, branch string) (Document, bool, error) {
	var d Document
	err := x.pool.QueryRow(ctx, `SELECT document_id, branch, document_type, created_at_utc_ms, is_deleted, coalesce(deleted_at_utc_ms, 0), last_index
FROM documents WHERE document_id = $1 AND branch = $2`, documentID, branch).
		Scan(&d.ID, &d.Branch, &d.DocumentType, &d.CreatedAtUtcMs, &d.IsDeleted, &d.DeletedAtUtcMs, &d.LastIndex)
	if err == pgx.ErrNoRows {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("indexer: get %s: %w", documentID, err)
	}
	return d, true, nil
}

// Children pages the targets of the parent's "child" relationships.
func (x *Index) Children(ctx context.Context, parentID, branch, cursor string, limit int) (RelationshipPage, error) {
	return x.Outgoing(ctx, parentID, branch, "child", cursor, limit)
}

// Outgoing pages the relationships from source, of relType ("" for every
// type), in (type, target) order.
func (x *Index) Outgoing(ctx context.Context, sourceID, branch, relType, cursor string, limit int) (RelationshipPage, error) {
	return x.relationships(ctx, "source_id", "target_id", sourceID, branch, relType, cursor, limit)
}

// Incoming pages the relationships to target, of relType ("" for every
// type), in (type, source) order.
func (x *Index) Incoming(ctx context.Context, targetID, branch, relType, cursor string, limit int) (RelationshipPage, error) {
	return x.relationships(ctx, "target_id", "source_id", targetID, branch, relType, cursor, limit)
}

// The cursor of a relationship page is "type\x1fother-id" of its last row.
const cursorSep = "\x1f"

func (x *Index) relationships(ctx context.Context, self, other, id, branch, relType, cursor string, limit int) (RelationshipPage, error) {
	limit = pageSize(limit)
	afterType, afterID, _ := strings.Cut(cursor, cursorSep)
	rows, err := x.pool.Query(ctx, `SELECT source_id, target_id, branch, type, metadata::text, since_index FROM document_relationships
WHERE `+self+` = $1 AND branch = $2 AND ($3 = '' OR type = $3) AND (type, `+other+`) > ($4, $5)
ORDER BY type, `+other+` LIMIT $6`, id, branch, relType, afterType, afterID, limit+1)
	if err != nil {
		return RelationshipPage{}, fmt.Errorf("indexer: relationships of %s: %w", id, err)
	}
	rels, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Relationship, error) {
		var rel Relationship
		var meta *string
		err := r.Scan(&rel.SourceID, &rel.TargetID, &rel.Branch, &rel.Type, &meta, &rel.SinceIndex)
		if meta != nil {
			rel.Metadata = json.RawMessage(*meta)
		}
		return rel, err
	})
	if err != nil {
		return RelationshipPage{}, fmt.Errorf("indexer: relationships of %s: %w", id, err)
	}
	page := RelationshipPage{Relationships: rels}
	if len(rels) > limit {
		page.Relationships = rels[:limit]
		last := rels[limit-1]
		o := last.TargetID
		if other == "source_id" {
			o = last.SourceID
		}
		page.Next = last.Type + cursorSep + o
	}
	return page, nil
}

// AppliedIndexes returns the last applied index of each document-scope
// stream (-1 when the index has not seen it). The index keeps no other
// scope, so other streams report -1.
func (x *Index) AppliedIndexes(ctx context.Context, streams []oplog.StreamKey) (map[oplog.StreamKey]int64, error) {
	out := make(map[oplog.StreamKey]int64, len(streams))
	var ids, branches []string
	for _, k := range streams {
		out[k] = -1
		if k.Scope == oplog.ScopeDocument {
			ids, branches = append(ids, k.DocumentID), append(branches, k.Branch)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := x.pool.Query(ctx, `SELECT d.document_id, d.branch, d.last_index FROM unnest($1::text[], $2::text[]) AS k(id, b)
JOIN documents d ON d.document_id = k.id AND d.branch = k.b`, ids, branches)
	if err != nil {
		return nil, fmt.Errorf("indexer: applied indexes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		k := oplog.StreamKey{Scope: oplog.ScopeDocument}
		var i int64
		if err := rows.Scan(&k.DocumentID, &k.Branch, &i); err != nil {
			return nil, fmt.Errorf("indexer: applied indexes: %w", err)
		}
		out[k] = i
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("indexer: applied indexes: %w", err)
	}
	return out, nil
}

// Reached reports whether the index has applied every document-scope
// coordinate of the token (the only scope it serves; other coordinates do
// not bear on its reads). A quarantined stream short of its coordinate is a
// *projectors.QuarantinedError.
func (x *Index) Reached(ctx context.Context, token oplog.ConsistencyToken) (bool, error) {
	return projectors.Reached(ctx, token, Name, x.AppliedIndexes, x.store, func(c oplog.Coordinate) bool { return c.Scope == oplog.ScopeDocument })
}

// Wait polls Reached every interval until the token is reached, a stream is
// quarantined, or ctx ends.
func (x *Index) Wait(ctx context.Context, token oplog.ConsistencyToken, interval time.Duration) error {
	return projectors.Wait(ctx, interval, func(ctx context.Context) (bool, error) { return x.Reached(ctx, token) })
}
