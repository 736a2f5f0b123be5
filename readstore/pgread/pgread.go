// Package pgread is the Postgres implementation of readstore.Store: it
// queries the document view (projectors/docview) and the relationship
// index (projectors/indexer) tables, and reads how far each projection has
// applied a stream — its rows' last index and the runner's quarantines — in
// one statement per batch of streams, which is what the read store's shared
// consistency-token poller runs each tick. Documents by id and slug go
// through docview's own query API so the two never disagree on what a
// document is.
package pgread

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/doclog/doclog/internal/pgtx"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/pgproj"
	"github.com/doclog/doclog/readstore"
)

// Store is readstore.Store over a pgx pool holding the projections' schema
// (pgproj, docview and indexer migrations).
type Store struct {
	pool *pgxpool.Pool
	view *docview.View
}

var _ readstore.Store = (*Store)(nil)

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, view: docview.NewView(pool, pgproj.New(pool))}
}

// Ping implements readstore.Store.
func (s *Store) Ping(ctx context.Context) (err error) {
	defer markUnavailable(&err)
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping the projection database: %w", err)
	}
	return nil
}

// Document implements readstore.Store.
func (s *Store) Document(ctx context.Context, id, branch string) (_ *readstore.Document, err error) {
	defer markUnavailable(&err)
	d, err := s.view.Get(ctx, id, branch)
	return convert(d, err)
}

// DocumentBySlug implements readstore.Store.
func (s *Store) DocumentBySlug(ctx context.Context, slug, branch string) (_ *readstore.Document, err error) {
	defer markUnavailable(&err)
	d, err := s.view.GetBySlug(ctx, slug, branch)
	return convert(d, err)
}

func convert(d *docview.Document, err error) (*readstore.Document, error) {
	var nf *docview.NotFoundError
	if errors.As(err, &nf) {
		return nil, &readstore.NotFoundError{Source: readstore.SourceDocView, DocumentID: nf.DocumentID, Slug: nf.Slug, Branch: nf.Branch}
	}
	if err != nil {
		return nil, fmt.Errorf("read the document view: %w", err)
	}
	out := &readstore.Document{
		ID: d.ID, Branch: d.Branch, DocumentType: d.DocumentType, Name: d.Name, Slug: d.Slug, Version: d.Version,
		CreatedAtUtcMs: d.CreatedAtUtcMs, LastModifiedUtcMs: d.LastModifiedUtcMs, IsDeleted: d.IsDeleted,
		DeletedAtUtcMs: d.DeletedAtUtcMs, Scopes: make(map[string]readstore.ScopeState, len(d.Scopes)),
	}
	for name, sc := range d.Scopes {
		out.Scopes[name] = readstore.ScopeState{State: sc.State, LastIndex: sc.LastIndex, Hash: sc.Hash, Version: sc.Version}
	}
	return out, nil
}

const indexedColumns = `d.document_type, d.created_at_utc_ms, d.is_deleted, d.deleted_at_utc_ms, d.last_index`

func scanIndexed(row pgx.Row, d *readstore.IndexedDocument) error {
	var (
		docType          *string
		created, deleted *int64
		last             *int64
		isDeleted        *bool
	)
	if err := row.Scan(&d.ID, &docType, &created, &isDeleted, &deleted, &last); err != nil {
		return err
	}
	d.LastIndex = -1
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
	return nil
}

// FindDocuments implements readstore.Store. With a parent it pages the
// parent's "child" links (a child the index has not seen created is listed
// without a type, unless a type is asked for); without, the documents
// table. Both are ordered by id in code-point order (the columns are
// COLLATE "C"), so a cursor is stable.
func (s *Store) FindDocuments(ctx context.Context, q readstore.FindQuery) (_ []readstore.IndexedDocument, err error) {
	defer markUnavailable(&err)
	var rows pgx.Rows
	// Each filter is its own statement rather than a "$n = '' OR …"
	// condition, so a cached generic plan still uses the matching index
	// (documents_by_type for a type, the primary keys otherwise).
	if q.Parent != "" {
		sql := `SELECT r.target_id, ` + indexedColumns + `
FROM document_relationships r
LEFT JOIN documents d ON d.document_id = r.target_id AND d.branch = r.branch
WHERE r.source_id = $1 AND r.branch = $2 AND r.type = 'child' AND r.target_id > $3 AND ($4 OR d.is_deleted IS NOT TRUE)`
		args := []any{q.Parent, q.Branch, q.After, q.IncludeDeleted, q.Limit + 1}
		if q.Type != "" {
			sql += ` AND d.document_type = $6`
			args = append(args, q.Type)
		}
		rows, err = s.pool.Query(ctx, sql+` ORDER BY r.target_id LIMIT $5`, args...)
	} else {
		sql := `SELECT d.document_id, ` + indexedColumns + `
FROM documents d
WHERE d.branch = $1 AND d.document_id > $2 AND ($3 OR NOT d.is_deleted)`
		args := []any{q.Branch, q.After, q.IncludeDeleted, q.Limit + 1}
		if q.Type != "" {
			sql += ` AND d.document_type = $5`
			args = append(args, q.Type)
		}
		rows, err = s.pool.Query(ctx, sql+` ORDER BY d.document_id LIMIT $4`, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("find documents: %w", err)
	}
	defer rows.Close()
	var out []readstore.IndexedDocument
	for rows.Next() {
		var d readstore.IndexedDocument
		if err := scanIndexed(rows, &d); err != nil {
			return nil, fmt.Errorf("find documents: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find documents: %w", err)
	}
	return out, nil
}

// IndexedDocument implements readstore.Store.
func (s *Store) IndexedDocument(ctx context.Context, id, branch string) (_ readstore.IndexedDocument, err error) {
	defer markUnavailable(&err)
	var d readstore.IndexedDocument
	err = scanIndexed(s.pool.QueryRow(ctx, `SELECT d.document_id, `+indexedColumns+`
FROM documents d WHERE d.document_id = $1 AND d.branch = $2`, id, branch), &d)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, &readstore.NotFoundError{Source: readstore.SourceIndexer, DocumentID: id, Branch: branch}
	}
	if err != nil {
		return d, fmt.Errorf("read indexed document %s: %w", id, err)
	}
	return d, nil
}

// Relationships implements readstore.Store.
func (s *Store) Relationships(ctx context.Context, q readstore.RelationshipQuery) (_ []readstore.Relationship, err error) {
	defer markUnavailable(&err)
	after := q.After
	if after == nil {
		// The empty key sorts before every row.
		after = &readstore.Relationship{}
	}
	// One statement per direction (and type filter), so the plan uses the
	// primary key for outgoing links and the incoming index for incoming.
	side := `source_id = $1`
	switch q.Direction {
	case readstore.DirectionIn:
		side = `target_id = $1`
	case readstore.DirectionBoth:
		side = `(source_id = $1 OR target_id = $1)`
	}
	sql := `SELECT source_id, type, target_id, metadata::text, since_index FROM document_relationships
WHERE ` + side + ` AND branch = $2 AND (source_id, type, target_id) > ($3, $4, $5)`
	args := []any{q.DocumentID, q.Branch, after.SourceID, after.Type, after.TargetID, q.Limit + 1}
	if q.Type != "" {
		sql += ` AND type = $7`
		args = append(args, q.Type)
	}
	rows, err := s.pool.Query(ctx, sql+` ORDER BY source_id, type, target_id LIMIT $6`, args...)
	if err != nil {
		return nil, fmt.Errorf("read relationships of %s: %w", q.DocumentID, err)
	}
	defer rows.Close()
	var rels []readstore.Relationship
	for rows.Next() {
		var r readstore.Relationship
		var meta *string
		if err := rows.Scan(&r.SourceID, &r.Type, &r.TargetID, &meta, &r.SinceIndex); err != nil {
			return nil, fmt.Errorf("read relationships of %s: %w", q.DocumentID, err)
		}
		if meta != nil {
			r.Metadata = []byte(*meta)
		}
		rels = append(rels, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read relationships of %s: %w", q.DocumentID, err)
	}
	return rels, nil
}

// Progress implements readstore.Store: the projection's last applied index
// of each stream (from the rows that serve the reads, so a token reached
// here is reached by the next read) and its quarantine, in one statement.
// The relationship index keeps one row per document and branch for the
// document scope; its other scopes are reported as never applied (the read
// store does not wait on them).
func (s *Store) Progress(ctx context.Context, source readstore.Source, streams []oplog.StreamKey) (_ map[oplog.StreamKey]readstore.StreamProgress, err error) {
	defer markUnavailable(&err)
	var applied, projector string
	switch source {
	case readstore.SourceDocView:
		projector = docview.Name
		applied = `(SELECT p.last_index FROM document_snapshots p WHERE p.document_id = k.d AND p.branch = k.b AND p.scope = k.s)`
	case readstore.SourceIndexer:
		projector = indexer.Name
		applied = `(SELECT p.last_index FROM documents p WHERE p.document_id = k.d AND p.branch = k.b AND k.s = 'document')`
	default:
		return nil, fmt.Errorf("progress of %s: not a projection", source)
	}
	n := len(streams)
	d, sc, b := make([]string, n), make([]string, n), make([]string, n)
	for i, k := range streams {
		d[i], sc[i], b[i] = k.DocumentID, k.Scope, k.Branch
	}
	rows, err := s.pool.Query(ctx, `SELECT k.d, k.s, k.b, coalesce(`+applied+`, -1), q.idx, q.error_name, q.reason
FROM unnest($1::text[], $2::text[], $3::text[]) AS k(d, s, b)
LEFT JOIN quarantined_streams q ON q.projector = $4 AND q.document_id = k.d AND q.scope = k.s AND q.branch = k.b`, d, sc, b, projector)
	if err != nil {
		return nil, fmt.Errorf("read the progress of %d streams on %s: %w", n, source, err)
	}
	defer rows.Close()
	out := make(map[oplog.StreamKey]readstore.StreamProgress, n)
	for rows.Next() {
		var (
			k         oplog.StreamKey
			p         readstore.StreamProgress
			qIdx      *int64
			qName, qR *string
		)
		if err := rows.Scan(&k.DocumentID, &k.Scope, &k.Branch, &p.Applied, &qIdx, &qName, &qR); err != nil {
			return nil, fmt.Errorf("read the progress of streams on %s: %w", source, err)
		}
		if qIdx != nil {
			p.Quarantine = &readstore.Quarantine{Index: *qIdx, ErrorName: deref(qName), Reason: deref(qR)}
		}
		out[k] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the progress of streams on %s: %w", source, err)
	}
	return out, nil
}

// markUnavailable wraps *errp in readstore.ErrUnavailable when it is a
// connection's failure (pgtx.Unreachable), so the read store answers 503
// without knowing the driver. Every exported method of Store defers it.
func markUnavailable(errp *error) {
	if err := *errp; err != nil && !errors.Is(err, readstore.ErrUnavailable) && pgtx.Unreachable(err) {
		*errp = fmt.Errorf("%w: %w", readstore.ErrUnavailable, err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
