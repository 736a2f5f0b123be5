package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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

// FindQuery selects documents of the index. Results are in code-point
// order of their id, after After.
type FindQuery struct {
	Branch string
	// Type keeps documents of this type; "" keeps every type.
	Type string
	// Parent keeps the children of this document (its "child"
	// relationships); "" keeps every document.
	Parent string
	// IncludeDeleted keeps deleted documents too.
	IncludeDeleted bool
	// After is the id of the previous page's last document ("" for the
	// first page).
	After string
	// Limit bounds the page; Find returns up to Limit+1 rows so the caller
	// knows whether there is a next page.
	Limit int
}

const documentColumns = `d.document_type, d.created_at_utc_ms, d.is_deleted, d.deleted_at_utc_ms, d.last_index`

// scanDocument reads an id and documentColumns; the columns are NULL for a
// child the index has not seen created, which reads as LastIndex -1.
func scanDocument(row pgx.Row, branch string) (Document, error) {
	d := Document{Branch: branch, LastIndex: -1}
	var (
		docType          *string
		created, deleted *int64
		last             *int64
		isDeleted        *bool
	)
	if err := row.Scan(&d.ID, &docType, &created, &isDeleted, &deleted, &last); err != nil {
		return d, err
	}
	if docType != nil {
		d.DocumentType = *docType
	}
	if created != nil {
		d.CreatedAtUtcMs = *created
	}
	if isDeleted != nil {
		d.IsDeleted = *isDeleted
	}
	if deleted != nil {
		d.DeletedAtUtcMs = *deleted
	}
	if last != nil {
		d.LastIndex = *last
	}
	return d, nil
}

// Find pages documents. With a parent it pages the parent's "child" links
// (a child the index has not seen created is listed without a type, unless
// a type is asked for); without, the documents table. Both are ordered by
// id in code-point order (the columns are COLLATE "C"), so a cursor is
// stable.
func (x *Index) Find(ctx context.Context, q FindQuery) ([]Document, error) {
	var (
		rows pgx.Rows
		err  error
	)
	// Each filter is its own statement rather than a "$n = '' OR …"
	// condition, so a cached generic plan still uses the matching index
	// (documents_by_type for a type, the primary keys otherwise).
	if q.Parent != "" {
		sql := `SELECT r.target_id, ` + documentColumns + `
FROM document_relationships r
LEFT JOIN documents d ON d.document_id = r.target_id AND d.branch = r.branch
WHERE r.source_id = $1 AND r.branch = $2 AND r.type = 'child' AND r.target_id > $3 AND ($4 OR d.is_deleted IS NOT TRUE)`
		args := []any{q.Parent, q.Branch, q.After, q.IncludeDeleted, q.Limit + 1}
		if q.Type != "" {
			sql += ` AND d.document_type = $6`
			args = append(args, q.Type)
		}
		rows, err = x.pool.Query(ctx, sql+` ORDER BY r.target_id LIMIT $5`, args...)
	} else {
		sql := `SELECT d.document_id, ` + documentColumns + `
FROM documents d
WHERE d.branch = $1 AND d.document_id > $2 AND ($3 OR NOT d.is_deleted)`
		args := []any{q.Branch, q.After, q.IncludeDeleted, q.Limit + 1}
		if q.Type != "" {
			sql += ` AND d.document_type = $5`
			args = append(args, q.Type)
		}
		rows, err = x.pool.Query(ctx, sql+` ORDER BY d.document_id LIMIT $4`, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("indexer: find documents: %w", err)
	}
	docs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Document, error) { return scanDocument(r, q.Branch) })
	if err != nil {
		return nil, fmt.Errorf("indexer: find documents: %w", err)
	}
	return docs, nil
}

// Get returns a document of the index and whether it has one.
func (x *Index) Get(ctx context.Context, documentID, branch string) (Document, bool, error) {
	d, err := scanDocument(x.pool.QueryRow(ctx, `SELECT d.document_id, `+documentColumns+`
FROM documents d WHERE d.document_id = $1 AND d.branch = $2`, documentID, branch), branch)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("indexer: get %s: %w", documentID, err)
	}
	return d, true, nil
}

// Direction selects relationships by the side the document is on.
type Direction string

const (
	DirectionOut  Direction = "out"  // the document is the source
	DirectionIn   Direction = "in"   // the document is the target
	DirectionBoth Direction = "both" // either
)

// LinkQuery selects the links of one document, ordered by (source, type,
// target), after After.
type LinkQuery struct {
	DocumentID string
	Branch     string
	Direction  Direction
	// Type keeps links of this type; "" keeps every type.
	Type string
	// After is the key of the previous page's last link (nil for the first
	// page); only SourceID, Type and TargetID are used.
	After *Relationship
	// Limit bounds the page; Links returns up to Limit+1 rows so the caller
	// knows whether there is a next page.
	Limit int
}

// Links pages a document's links.
func (x *Index) Links(ctx context.Context, q LinkQuery) ([]Relationship, error) {
	after := q.After
	if after == nil {
		// The empty key sorts before every row.
		after = &Relationship{}
	}
	// One statement per direction (and type filter), so the plan uses the
	// primary key for outgoing links and the incoming index for incoming.
	side := `source_id = $1`
	switch q.Direction {
	case DirectionIn:
		side = `target_id = $1`
	case DirectionBoth:
		side = `(source_id = $1 OR target_id = $1)`
	}
	sql := `SELECT source_id, type, target_id, metadata::text, since_index FROM document_relationships
WHERE ` + side + ` AND branch = $2 AND (source_id, type, target_id) > ($3, $4, $5)`
	args := []any{q.DocumentID, q.Branch, after.SourceID, after.Type, after.TargetID, q.Limit + 1}
	if q.Type != "" {
		sql += ` AND type = $7`
		args = append(args, q.Type)
	}
	rows, err := x.pool.Query(ctx, sql+` ORDER BY source_id, type, target_id LIMIT $6`, args...)
	if err != nil {
		return nil, fmt.Errorf("indexer: relationships of %s: %w", q.DocumentID, err)
	}
	rels, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Relationship, error) {
		rel := Relationship{Branch: q.Branch}
		var meta *string
		err := r.Scan(&rel.SourceID, &rel.Type, &rel.TargetID, &meta, &rel.SinceIndex)
		if meta != nil {
			rel.Metadata = json.RawMessage(*meta)
		}
		return rel, err
	})
	if err != nil {
		return nil, fmt.Errorf("indexer: relationships of %s: %w", q.DocumentID, err)
	}
	return rels, nil
}

// Outgoing pages the relationships from source, of relType ("" for every
// type), in (type, target) order; cursor is the previous page's Next.
func (x *Index) Outgoing(ctx context.Context, sourceID, branch, relType, cursor string, limit int) (RelationshipPage, error) {
	return x.linkPage(ctx, LinkQuery{DocumentID: sourceID, Branch: branch, Direction: DirectionOut, Type: relType}, cursor, limit)
}

// The cursor of a relationship page is "source\x1ftype\x1ftarget" of its
// last row.
const cursorSep = "\x1f"

// linkPage is Links with a page size and an opaque cursor.
func (x *Index) linkPage(ctx context.Context, q LinkQuery, cursor string, limit int) (RelationshipPage, error) {
	q.Limit = pageSize(limit)
	if cursor != "" {
		parts := strings.SplitN(cursor, cursorSep, 3)
		if len(parts) != 3 {
			return RelationshipPage{}, fmt.Errorf("indexer: relationships of %s: malformed cursor %q", q.DocumentID, cursor)
		}
		q.After = &Relationship{SourceID: parts[0], Type: parts[1], TargetID: parts[2]}
	}
	rels, err := x.Links(ctx, q)
	if err != nil {
		return RelationshipPage{}, err
	}
	page := RelationshipPage{Relationships: rels}
	if len(rels) > q.Limit {
		page.Relationships = rels[:q.Limit]
		last := rels[q.Limit-1]
		page.Next = last.SourceID + cursorSep + last.Type + cursorSep + last.TargetID
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
