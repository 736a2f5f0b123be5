// Package pgread is the Postgres implementation of readstore.Store: it
// serves documents through the document view's query API
// (projectors/docview) and finds and links through the relationship
// index's (projectors/indexer), so each projection owns the SQL over its
// tables, and reads how far each projection has applied a stream — its
// rows' last index and the runner's quarantines — in one statement per
// batch of streams, which is what the read store's shared consistency-token
// poller runs each tick.
package pgread

import (
	"context"
	"errors"
	"fmt"

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
	pool  *pgxpool.Pool
	view  *docview.View
	index *indexer.Index
}

var _ readstore.Store = (*Store)(nil)

var _ readstore.ProgressNotifier = (*Store)(nil)

// WatchProgress follows the projector transactions' notifications
// (pgproj.WatchProgress) until ctx ends.
func (s *Store) WatchProgress(ctx context.Context, progressed func(readstore.Source), failed func(error)) {
	pgproj.WatchProgress(ctx, s.pool, func(projector string) { progressed(readstore.Source(projector)) }, failed)
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store {
	ps := pgproj.New(pool)
	return &Store{pool: pool, view: docview.NewView(pool, ps), index: indexer.NewIndex(pool, ps)}
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

func indexed(d indexer.Document) readstore.IndexedDocument {
	return readstore.IndexedDocument{ID: d.ID, DocumentType: d.DocumentType, CreatedAtUtcMs: d.CreatedAtUtcMs,
		IsDeleted: d.IsDeleted, DeletedAtUtcMs: d.DeletedAtUtcMs, LastIndex: d.LastIndex}
}

// FindDocuments implements readstore.Store through the index's own query.
func (s *Store) FindDocuments(ctx context.Context, q readstore.FindQuery) (_ []readstore.IndexedDocument, err error) {
	defer markUnavailable(&err)
	docs, err := s.index.Find(ctx, indexer.FindQuery{Branch: q.Branch, Type: q.Type, Parent: q.Parent,
		IncludeDeleted: q.IncludeDeleted, After: q.After, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]readstore.IndexedDocument, len(docs))
	for i, d := range docs {
		out[i] = indexed(d)
	}
	return out, nil
}

// IndexedDocument implements readstore.Store.
func (s *Store) IndexedDocument(ctx context.Context, id, branch string) (_ readstore.IndexedDocument, err error) {
	defer markUnavailable(&err)
	d, ok, err := s.index.Get(ctx, id, branch)
	if err != nil {
		return readstore.IndexedDocument{}, err
	}
	if !ok {
		return readstore.IndexedDocument{}, &readstore.NotFoundError{Source: readstore.SourceIndexer, DocumentID: id, Branch: branch}
	}
	return indexed(d), nil
}

// Relationships implements readstore.Store through the index's own query.
func (s *Store) Relationships(ctx context.Context, q readstore.RelationshipQuery) (_ []readstore.Relationship, err error) {
	defer markUnavailable(&err)
	lq := indexer.LinkQuery{DocumentID: q.DocumentID, Branch: q.Branch, Direction: indexer.Direction(q.Direction), Type: q.Type, Limit: q.Limit}
	if q.After != nil {
		lq.After = &indexer.Relationship{SourceID: q.After.SourceID, Type: q.After.Type, TargetID: q.After.TargetID}
	}
	links, err := s.index.Links(ctx, lq)
	if err != nil {
		return nil, err
	}
	out := make([]readstore.Relationship, len(links))
	for i, l := range links {
		out[i] = readstore.Relationship{SourceID: l.SourceID, Type: l.Type, TargetID: l.TargetID, Metadata: l.Metadata, SinceIndex: l.SinceIndex}
	}
	return out, nil
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
