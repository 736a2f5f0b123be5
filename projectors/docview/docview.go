// Package docview is the document-view projector: document_snapshots (per
// stream: the scope's state, the index and hash of its last operation; on the
// document scope's row the header, name, slug, creation and deletion) and
// slug_mappings (a deleted document's slug is never resurrected, a live
// document's slug is never taken by another). Its query API (View) serves
// documents by id or slug to the read store (readstore/pgread) and the admin
// CLI, the applied index per stream to the bench, and Reached, whether the
// view has applied a consistency token.
//
// The projection is a Postgres store; it writes in the runner's batch
// transaction (projectors/pgproj) so its rows, the verified stream heads and
// the partition checkpoint commit together.
package docview

import (
	"context"
	"embed"
	"fmt"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/pgproj"
)

// Name is the projector's name: its consumer group is "doclog-docview".
const Name = "docview"

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations is the document view's migration set; apply it with
// pgmigrate.Migrate.
func Migrations() pgmigrate.Set {
	return pgmigrate.Set{Component: Name, FS: migrationFS, Dir: "migrations"}
}

// Projector writes the document view. It follows every scope.
type Projector struct {
	// Generation names a copy of the tables being rebuilt (Rebuild); ""
	// is the live tables readers query.
	Generation string
}

var _ projectors.Generational = Projector{}

// Name implements projectors.Projector: "docview", or "docview_<gen>" for
// a generation being rebuilt.
func (p Projector) Name() string { return projectors.GenerationName(Name, p.Generation) }

// Tables implements projectors.Generational.
func (Projector) Tables() []string { return []string{"document_snapshots", "slug_mappings"} }

// WithGeneration implements projectors.Generational.
func (Projector) WithGeneration(gen string) projectors.Projector { return Projector{Generation: gen} }

// FullHistory implements projectors.FullHistory: readers of the view expect
// every document of the log, so it always starts at the beginning.
func (Projector) FullHistory() bool { return true }

// Filter implements projectors.Projector: the view keeps every stream.
func (Projector) Filter() projectors.Filter { return projectors.Filter{} }

// Apply implements projectors.Projector: it upserts one snapshot row per
// changed stream (only over a lower last index) and moves slugs, all sent
// with the batch's commit (pgproj.Queue).
func (p Projector) Apply(ctx context.Context, t projectors.Tx, changes []projectors.Change) error {
	n := len(changes)
	docs, branches, scopes, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	states, hashes := make([]string, n), make([]string, n)
	versions := make([]int32, n)
	idx, modified := make([]int64, n), make([]int64, n)
	names, slugs := make([]*string, n), make([]*string, n)
	created, deletedAt := make([]*int64, n), make([]*int64, n)
	deleted := make([]bool, n)
	for i := range changes {
		c := &changes[i]
		docs[i], branches[i], scopes[i], types[i] = c.Stream.DocumentID, c.Stream.Branch, c.Stream.Scope, c.DocumentType
		states[i], hashes[i], versions[i] = string(c.Head.State), c.Head.Hash, int32(c.Head.Version)
		idx[i], modified[i] = c.Head.LastIndex, c.Head.LastTimestampUtcMs
		if c.Stream.Scope != oplog.ScopeDocument {
			continue
		}
		info, ok := model.DocumentInfoOf(c.State)
		if !ok {
			continue
		}
		names[i], slugs[i], created[i] = &info.Name, &info.Slug, &info.CreatedAtUtcMs
		deleted[i] = info.IsDeleted
		if info.IsDeleted {
			deletedAt[i] = &info.DeletedAtUtcMs
		}
		if err := moveSlug(t, projectors.GenerationName("slug_mappings", p.Generation), c.Stream, info, c.Head.LastIndex); err != nil {
			return err
		}
	}
	return pgproj.Queue(t, fmt.Sprintf("docview: upsert %d snapshots", n), `INSERT INTO `+projectors.GenerationName("document_snapshots", p.Generation)+` AS s (document_id, branch, scope, document_type, model_version, state, last_index, last_hash,
  last_modified_utc_ms, name, slug, created_at_utc_ms, is_deleted, deleted_at_utc_ms)
SELECT d, b, sc, ty, v, st::json, i, h, m, nm, sl, cr, del, da
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::bigint[], $8::text[], $9::bigint[],
  $10::text[], $11::text[], $12::bigint[], $13::bool[], $14::bigint[]) AS u(d, b, sc, ty, v, st, i, h, m, nm, sl, cr, del, da)
ON CONFLICT (document_id, branch, scope) DO UPDATE SET
  document_type = EXCLUDED.document_type, model_version = EXCLUDED.model_version, state = EXCLUDED.state,
  last_index = EXCLUDED.last_index, last_hash = EXCLUDED.last_hash, last_modified_utc_ms = EXCLUDED.last_modified_utc_ms,
  name = EXCLUDED.name, slug = EXCLUDED.slug, created_at_utc_ms = EXCLUDED.created_at_utc_ms,
  is_deleted = EXCLUDED.is_deleted, deleted_at_utc_ms = EXCLUDED.deleted_at_utc_ms, updated_at = now()
WHERE s.last_index < EXCLUDED.last_index`,
		docs, branches, scopes, types, versions, states, idx, hashes, modified, names, slugs, created, deleted, deletedAt)
}

// moveSlug keeps slug_mappings in line with a document scope change. A
// deleted document keeps every slug it holds (never resurrected); a live one
// releases the slugs it no longer has and claims its slug unless another
// document holds it (never taken). Both writes go with the commit, in the
// order of the changes, before the snapshots' upsert.
func moveSlug(t projectors.Tx, table string, k oplog.StreamKey, info model.DocumentInfo, index int64) error {
	if info.IsDeleted {
		return nil
	}
	if err := pgproj.Queue(t, "docview: release slugs of "+k.DocumentID, `DELETE FROM `+table+` WHERE document_id = $1 AND branch = $2 AND slug <> $3`,
		k.DocumentID, k.Branch, info.Slug); err != nil {
		return err
	}
	if info.Slug == "" {
		return nil
	}
	return pgproj.Queue(t, fmt.Sprintf("docview: claim slug %q for %s", info.Slug, k.DocumentID),
		`INSERT INTO `+table+` (slug, branch, document_id, claimed_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		info.Slug, k.Branch, k.DocumentID, index)
}
