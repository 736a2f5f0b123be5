// Package indexer is the relationship-index projector: documents (type and
// deletion per document, with the last applied index of its document scope)
// and document_relationships (the links ADD_RELATIONSHIP and
// REMOVE_RELATIONSHIP leave in a document's document scope). It follows the
// document scope only. Its query API finds documents by type, children of a
// parent and relationships in and out, with cursor paging, and honours
// consistency tokens.
//
// The projection is a Postgres store writing in the runner's batch
// transaction (projectors/pgproj).
package indexer

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/pgproj"
)

// Name is the projector's name: its consumer group is "doclog-indexer".
const Name = "indexer"

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations is the indexer's migration set; apply it with pgmigrate.Migrate.
func Migrations() pgmigrate.Set {
	return pgmigrate.Set{Component: Name, FS: migrationFS, Dir: "migrations"}
}

// Projector writes the relationship index.
type Projector struct {
	// Generation names a copy of the tables being rebuilt (Rebuild); ""
	// is the live tables readers query.
	Generation string
}

var _ projectors.Generational = Projector{}

// Name implements projectors.Projector: "indexer", or "indexer_<gen>" for
// a generation being rebuilt.
func (p Projector) Name() string { return projectors.GenerationName(Name, p.Generation) }

// Tables implements projectors.Generational.
func (Projector) Tables() []string { return []string{"documents", "document_relationships"} }

// WithGeneration implements projectors.Generational.
func (Projector) WithGeneration(gen string) projectors.Projector { return Projector{Generation: gen} }

// FullHistory implements projectors.FullHistory: readers of the index expect
// every document of the log, so it always starts at the beginning.
func (Projector) FullHistory() bool { return true }

// Filter implements projectors.Projector: only the document scope holds
// what the index keeps, of every document type and branch.
func (Projector) Filter() projectors.Filter {
	return projectors.Filter{Scopes: []string{oplog.ScopeDocument}}
}

// Apply implements projectors.Projector. The relationships of a document
// are set to those of its verified state, so the table equals a replay
// whatever was applied before; a link keeps the index of the operation that
// first added it.
func (p Projector) Apply(ctx context.Context, t projectors.Tx, changes []projectors.Change) error {
	tx, err := pgproj.Conn(t)
	if err != nil {
		return err
	}
	// One upsert for every document; the rows it moved (not those already
	// at or past the change's index) get their relationships set.
	type doc struct {
		c    *projectors.Change
		info model.DocumentInfo
	}
	docs := map[[2]string]doc{}
	var ids, branches, types []string
	var created, last []int64
	var deleted []bool
	var deletedAt []*int64
	for i := range changes {
		c := &changes[i]
		info, ok := model.DocumentInfoOf(c.State)
		if !ok {
			continue
		}
		docs[[2]string{c.Stream.DocumentID, c.Stream.Branch}] = doc{c: c, info: info}
		ids, branches, types = append(ids, c.Stream.DocumentID), append(branches, c.Stream.Branch), append(types, c.DocumentType)
		created, last, deleted = append(created, info.CreatedAtUtcMs), append(last, c.Head.LastIndex), append(deleted, info.IsDeleted)
		var at *int64
		if info.IsDeleted {
			at = &info.DeletedAtUtcMs
		}
		deletedAt = append(deletedAt, at)
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `INSERT INTO `+projectors.GenerationName("documents", p.Generation)+` AS d (document_id, branch, document_type, created_at_utc_ms, is_deleted, deleted_at_utc_ms, last_index)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bool[], $6::bigint[], $7::bigint[])
ON CONFLICT (document_id, branch) DO UPDATE SET document_type = EXCLUDED.document_type, created_at_utc_ms = EXCLUDED.created_at_utc_ms,
  is_deleted = EXCLUDED.is_deleted, deleted_at_utc_ms = EXCLUDED.deleted_at_utc_ms, last_index = EXCLUDED.last_index, updated_at = now()
WHERE d.last_index < EXCLUDED.last_index
RETURNING d.document_id, d.branch`, ids, branches, types, created, deleted, deletedAt, last)
	if err != nil {
		return fmt.Errorf("indexer: upsert %d documents: %w", len(ids), err)
	}
	moved := map[[2]string]bool{}
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			rows.Close()
			return fmt.Errorf("indexer: upsert %d documents: %w", len(ids), err)
		}
		moved[k] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("indexer: upsert %d documents: %w", len(ids), err)
	}
	for i := range ids {
		k := [2]string{ids[i], branches[i]}
		if !moved[k] {
			continue // already at or past this index
		}
		d := docs[k]
		if err := setRelationships(t, projectors.GenerationName("document_relationships", p.Generation), d.c, d.info.Relationships); err != nil {
			return err
		}
	}
	return nil
}

// setRelationships queues (pgproj.Queue) the writes that make the
// document's stored links those of its verified state.
func setRelationships(t projectors.Tx, table string, c *projectors.Change, rels []model.Relationship) error {
	n := len(rels)
	types, targets, metas := make([]string, n), make([]string, n), make([]*string, n)
	since := make([]int64, n)
	for i, r := range rels {
		types[i], targets[i], since[i] = r.Type, r.TargetID, addedAt(c, r)
		if r.Metadata != nil {
			b, err := json.Marshal(r.Metadata)
			if err != nil {
				return fmt.Errorf("indexer: encode metadata of %s→%s: %w", c.Stream.DocumentID, r.TargetID, err)
			}
			s := string(b)
			metas[i] = &s
		}
	}
	k := c.Stream
	if err := pgproj.Queue(t, "indexer: remove relationships of "+k.DocumentID, `DELETE FROM `+table+` r WHERE r.source_id = $1 AND r.branch = $2
AND NOT EXISTS (SELECT 1 FROM unnest($3::text[], $4::text[]) AS u(ty, t) WHERE u.ty = r.type AND u.t = r.target_id)`,
		k.DocumentID, k.Branch, types, targets); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return pgproj.Queue(t, "indexer: add relationships of "+k.DocumentID, `INSERT INTO `+table+` (source_id, branch, type, target_id, metadata, since_index)
SELECT $1, $2, ty, t, m::json, s FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[]) AS u(ty, t, m, s)
ON CONFLICT (source_id, branch, type, target_id) DO UPDATE SET metadata = EXCLUDED.metadata, since_index = EXCLUDED.since_index
WHERE EXCLUDED.since_index > $7`, k.DocumentID, k.Branch, types, targets, metas, since, c.From)
}

// addedAt is the index of the change's last ADD_RELATIONSHIP of r, or
// c.From when the link predates the change: a stored link is then left as
// it is (the upsert only moves since_index past c.From, i.e. for a link
// removed and added again within the change).
func addedAt(c *projectors.Change, r model.Relationship) int64 {
	at := c.From
	for _, op := range c.Operations {
		if op.Action.Type != model.ActionAddRelationship {
			continue
		}
		var in model.RelationshipInput
		if json.Unmarshal(op.Action.Input, &in) != nil {
			continue
		}
		if in.Type == "" {
			in.Type = model.RelationshipChild
		}
		if in.TargetID == r.TargetID && in.Type == r.Type {
			at = op.Index
		}
	}
	return at
}
