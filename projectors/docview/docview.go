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

// largeState is the size from which a snapshot goes in a statement of its
// own. In the batch's arrays every state is copied into a text[] that pgx
// grows by doubling, then into the message: for a batch of 1 MB states that
// was a tenth of the view's CPU, and its garbage more. Alone, the state is
// one parameter, copied once, and never converted to a string.
const largeState = 64 << 10

// snapshotColumns are the columns an upsert writes, in the order of its
// parameters; onConflictSQL completes it.
const snapshotColumns = `(document_id, branch, scope, document_type, model_version, state, last_index, last_hash,
  last_modified_utc_ms, name, slug, created_at_utc_ms, is_deleted, deleted_at_utc_ms)`

// onConflictSQL updates a stored snapshot, only over a lower last index.
const onConflictSQL = `
ON CONFLICT (document_id, branch, scope) DO UPDATE SET
  document_type = EXCLUDED.document_type, model_version = EXCLUDED.model_version, state = EXCLUDED.state,
  last_index = EXCLUDED.last_index, last_hash = EXCLUDED.last_hash, last_modified_utc_ms = EXCLUDED.last_modified_utc_ms,
  name = EXCLUDED.name, slug = EXCLUDED.slug, created_at_utc_ms = EXCLUDED.created_at_utc_ms,
  is_deleted = EXCLUDED.is_deleted, deleted_at_utc_ms = EXCLUDED.deleted_at_utc_ms, updated_at = now()
WHERE s.last_index < EXCLUDED.last_index`

// snapshot is one row of document_snapshots, as the upserts take it.
type snapshot struct {
	doc, branch, scope, typ string
	version                 int32
	state                   []byte
	index                   int64
	hash                    string
	modified                int64
	name, slug              *string
	created, deletedAt      *int64
	deleted                 bool
}

// snapshotArrays are rows of document_snapshots column by column, the
// parameters of one upsert of them all.
type snapshotArrays struct {
	docs, branches, scopes, types, states, hashes []string
	versions                                      []int32
	idx, modified                                 []int64
	names, slugs                                  []*string
	created, deletedAt                            []*int64
	deleted                                       []bool
}

// newSnapshotArrays has room for n rows.
func newSnapshotArrays(n int) *snapshotArrays {
	return &snapshotArrays{
		docs: make([]string, 0, n), branches: make([]string, 0, n), scopes: make([]string, 0, n), types: make([]string, 0, n),
		states: make([]string, 0, n), hashes: make([]string, 0, n), versions: make([]int32, 0, n),
		idx: make([]int64, 0, n), modified: make([]int64, 0, n), names: make([]*string, 0, n), slugs: make([]*string, 0, n),
		created: make([]*int64, 0, n), deletedAt: make([]*int64, 0, n), deleted: make([]bool, 0, n),
	}
}

func (a *snapshotArrays) add(r snapshot) {
	a.docs, a.branches, a.scopes, a.types = append(a.docs, r.doc), append(a.branches, r.branch), append(a.scopes, r.scope), append(a.types, r.typ)
	a.states, a.hashes, a.versions = append(a.states, string(r.state)), append(a.hashes, r.hash), append(a.versions, r.version)
	a.idx, a.modified = append(a.idx, r.index), append(a.modified, r.modified)
	a.names, a.slugs, a.created = append(a.names, r.name), append(a.slugs, r.slug), append(a.created, r.created)
	a.deleted, a.deletedAt = append(a.deleted, r.deleted), append(a.deletedAt, r.deletedAt)
}

// Apply implements projectors.Projector: it upserts one snapshot row per
// changed stream (only over a lower last index) and moves slugs, all sent
// with the batch's commit (pgproj.Queue): the small states in one statement,
// each large one in a statement of its own.
func (p Projector) Apply(ctx context.Context, t projectors.Tx, changes []projectors.Change) error {
	table := projectors.GenerationName("document_snapshots", p.Generation)
	small := newSnapshotArrays(len(changes))
	for i := range changes {
		c := &changes[i]
		r := snapshot{
			doc: c.Stream.DocumentID, branch: c.Stream.Branch, scope: c.Stream.Scope, typ: c.DocumentType,
			version: int32(c.Head.Version), state: c.Head.State, index: c.Head.LastIndex, hash: c.Head.Hash,
			modified: c.Head.LastTimestampUtcMs,
		}
		if c.Stream.Scope == oplog.ScopeDocument {
			if info, ok := model.DocumentInfoOf(c.State); ok {
				r.name, r.slug, r.created, r.deleted = &info.Name, &info.Slug, &info.CreatedAtUtcMs, info.IsDeleted
				if info.IsDeleted {
					r.deletedAt = &info.DeletedAtUtcMs
				}
				if err := moveSlug(t, projectors.GenerationName("slug_mappings", p.Generation), c.Stream, info, c.Head.LastIndex); err != nil {
					return err
				}
			}
		}
		if len(r.state) < largeState {
			small.add(r)
			continue
		}
		err := pgproj.Queue(t, "docview: upsert the snapshot of "+c.Stream.String(), `INSERT INTO `+table+` AS s `+snapshotColumns+`
VALUES ($1, $2, $3, $4, $5, $6::json, $7, $8, $9, $10, $11, $12, $13, $14)`+onConflictSQL,
			r.doc, r.branch, r.scope, r.typ, r.version, r.state, r.index, r.hash, r.modified, r.name, r.slug, r.created, r.deleted, r.deletedAt)
		if err != nil {
			return err
		}
	}
	n := len(small.docs)
	if n == 0 {
		return nil
	}
	a := small
	return pgproj.Queue(t, fmt.Sprintf("docview: upsert %d snapshots", n), `INSERT INTO `+table+` AS s `+snapshotColumns+`
SELECT d, b, sc, ty, v, st::json, i, h, m, nm, sl, cr, del, da
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::bigint[], $8::text[], $9::bigint[],
  $10::text[], $11::text[], $12::bigint[], $13::bool[], $14::bigint[]) AS u(d, b, sc, ty, v, st, i, h, m, nm, sl, cr, del, da)`+onConflictSQL,
		a.docs, a.branches, a.scopes, a.types, a.versions, a.states, a.idx, a.hashes, a.modified, a.names, a.slugs, a.created, a.deleted, a.deletedAt)
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
