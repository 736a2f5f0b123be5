package projectors_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/pgproj"
)

func TestFilterFollows(t *testing.T) {
	t.Parallel()
	k := func(scope, branch string) oplog.StreamKey {
		return oplog.StreamKey{DocumentID: "d", Scope: scope, Branch: branch}
	}
	all := projectors.Filter{}
	require.True(t, all.Follows("any/type", k("local", "b")), "the zero filter follows everything")
	require.False(t, all.ByType())

	f := projectors.Filter{DocumentTypes: []string{drive.DocumentType}, Scopes: []string{oplog.ScopeGlobal}, Branches: []string{oplog.DefaultBranch}}
	require.True(t, f.ByType())
	require.True(t, f.Follows(drive.DocumentType, k(oplog.ScopeGlobal, oplog.DefaultBranch)))
	require.False(t, f.Follows(jsondoc.DocumentType, k(oplog.ScopeGlobal, oplog.DefaultBranch)), "another type")
	require.False(t, f.Follows(drive.DocumentType, k(oplog.ScopeDocument, oplog.DefaultBranch)), "another scope")
	require.False(t, f.Follows(drive.DocumentType, k(oplog.ScopeGlobal, "feature")), "another branch")
	require.True(t, f.FollowsStream(k(oplog.ScopeGlobal, oplog.DefaultBranch)))
	require.Equal(t, "types=doclog/drive scopes=global branches=main", f.String())

	require.NoError(t, f.Validate())
	require.ErrorContains(t, projectors.Filter{Scopes: []string{""}}.Validate(), "scope must not be empty")
	err := projectors.Config{Projector: &followed{filter: projectors.Filter{DocumentTypes: []string{""}}}}.WithDefaults().Validate()
	require.ErrorContains(t, err, "projector followed: a projector filter's document type must not be empty")
}

// followed keeps one row per stream it applied, in a table of the test's
// own: which streams reached a projector's tables, whatever their model.
type followed struct {
	gen    string
	filter projectors.Filter
}

func (p *followed) Name() string              { return projectors.GenerationName("followed", p.gen) }
func (p *followed) Filter() projectors.Filter { return p.filter }
func (p *followed) Tables() []string          { return []string{"followed_streams"} }
func (p *followed) WithGeneration(gen string) projectors.Projector {
	return &followed{gen: gen, filter: p.filter}
}

func (p *followed) Apply(ctx context.Context, t projectors.Tx, changes []projectors.Change) error {
	tx, err := pgproj.Conn(t)
	if err != nil {
		return err
	}
	table := pgx.Identifier{projectors.GenerationName("followed_streams", p.gen)}.Sanitize()
	for _, ch := range changes {
		_, err := tx.Exec(ctx, `INSERT INTO `+table+` (document_id, scope, branch, document_type, last_index, hash)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (document_id, scope, branch) DO UPDATE SET last_index = excluded.last_index, hash = excluded.hash`,
			ch.Stream.DocumentID, ch.Stream.Scope, ch.Stream.Branch, ch.DocumentType, ch.Head.LastIndex, ch.Head.Hash)
		if err != nil {
			return fmt.Errorf("write %s: %w", ch.Stream, err)
		}
	}
	return nil
}

// A projector that follows one document type's global scope on main gets
// those streams, verified, and nothing of the others (no row, no head),
// from its batches, from the reconciler (which reads an unheld document's
// type once, not on every pass), in a rebuild; a lift of a stream it does
// not follow is refused.
func TestFilterHoldsEverywhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.Pool.Exec(ctx, `CREATE TABLE followed_streams (document_id text, scope text, branch text, document_type text,
last_index bigint, hash text, PRIMARY KEY (document_id, scope, branch))`)
	require.NoError(t, err)
	w := b.NewWorkload(21)
	announced := w.Random("fa", 12, 150)
	announced = append(announced, w.RandomOn("fb", "feature", 6, 40)...)
	// Documents whose records are never announced: only the reconciler
	// brings them in.
	w.Random("fc", 9, 60)
	p := &followed{filter: projectors.Filter{DocumentTypes: []string{drive.DocumentType}, Scopes: []string{oplog.ScopeGlobal}, Branches: []string{oplog.DefaultBranch}}}

	r := b.Start(b.Config(p, "followed"))
	b.Publish(announced...)
	replay, failed := b.Replay()
	require.Empty(t, failed)
	want := map[string]string{} // stream -> last index and hash
	var unannounced int
	for k, st := range replay {
		if p.filter.Follows(st.DocumentType, k) {
			want[k.String()] = fmt.Sprintf("%s %d %s", st.DocumentType, st.Revision-1, st.Hash)
		}
	}
	for _, d := range w.Docs {
		if d.ID[:2] == "fc" {
			unannounced++
		}
	}
	require.NotEmpty(t, want)
	rows := func(table, projector string) map[string]string {
		q := `SELECT document_id, scope, branch, document_type, last_index, hash FROM ` + table
		args := []any{}
		if projector != "" {
			q = `SELECT document_id, scope, branch, document_type, last_index, hash FROM projector_streams WHERE projector = $1`
			args = append(args, projector)
		}
		rs, err := b.Pool.Query(ctx, q, args...)
		require.NoError(t, err)
		got := map[string]string{}
		for rs.Next() {
			var k oplog.StreamKey
			var typ, hash string
			var last int64
			require.NoError(t, rs.Scan(&k.DocumentID, &k.Scope, &k.Branch, &typ, &last, &hash))
			got[k.String()] = fmt.Sprintf("%s %d %s", typ, last, hash)
		}
		require.NoError(t, rs.Err())
		return got
	}
	// The batches bring in the announced documents' followed streams.
	b.Eventually(func() bool {
		got := rows("followed_streams", "")
		for k := range got {
			if k[:2] != "fa" {
				return false
			}
		}
		n := 0
		for k := range want {
			if k[:2] == "fa" {
				n++
			}
		}
		return len(got) == n
	}, 90*time.Second, "the batches did not bring in the followed streams")

	rep, err := r.Reconcile(ctx)
	require.NoError(t, err)
	require.Positive(t, rep.Healed, "the unannounced documents come from the reconciler")
	require.Equal(t, want, rows("followed_streams", ""), "the table holds exactly the followed streams, at the log's heads")
	require.Equal(t, want, rows("", p.Name()), "heads are stored for the followed streams only")
	reads := r.DocumentTypeReads()
	require.Positive(t, reads, "the unannounced documents' types are read from the log")
	require.LessOrEqual(t, reads, int64(unannounced), "at most once per document the records did not name")
	rep, err = r.Reconcile(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Behind, "a stream not followed is never behind")
	require.Equal(t, reads, r.DocumentTypeReads(), "a second pass reads no type again")

	// A lift of a stream not followed is refused, before anything is read.
	var jsonDoc, driveDoc string
	for _, d := range w.Docs {
		switch {
		case d.Type == jsondoc.DocumentType && jsonDoc == "":
			jsonDoc = d.ID
		case d.Type == drive.DocumentType && driveDoc == "":
			driveDoc = d.ID
		}
	}
	cfg := b.Config(p, "followed-lift")
	_, err = projectors.Lift(ctx, cfg, oplog.StreamKey{DocumentID: jsonDoc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
	require.ErrorContains(t, err, "does not follow documents of type doclog/json")
	_, err = projectors.Lift(ctx, cfg, oplog.StreamKey{DocumentID: driveDoc, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch})
	require.ErrorContains(t, err, "does not follow scope \"document\"")

	// A rebuild builds the same table from the log, with the same heads.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err = projectors.Rebuild(rctx, b.Config(p, "followed-rebuild"))
	require.NoError(t, err)
	require.Equal(t, want, rows("followed_streams", ""), "the rebuilt table")
	require.Equal(t, want, rows("", p.Name()), "the rebuilt heads")
	var generations []string
	rs, err := b.Pool.Query(ctx, `SELECT DISTINCT projector FROM projector_streams`)
	require.NoError(t, err)
	generations, err = pgx.CollectRows(rs, pgx.RowTo[string])
	require.NoError(t, err)
	require.True(t, slices.Equal([]string{p.Name()}, generations), "heads under the live name only, got %v", generations)
}
