package projectors_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/projtest"
)

// bundle is one test's environment with both projectors' query sides.
type bundle struct {
	*projtest.Env
	view  *docview.View
	index *indexer.Index
}

func setup(t *testing.T) *bundle {
	t.Helper()
	env := projtest.New(t, docview.Migrations(), indexer.Migrations())
	return &bundle{Env: env, view: docview.NewView(env.Pool, env.Store), index: indexer.NewIndex(env.Pool, env.Store)}
}

// caughtUp reports whether both projections hold every expected stream at
// its last index (the indexer only the document scope).
func (b *bundle) caughtUp(t *testing.T, want map[oplog.StreamKey]*model.StreamState, indexerToo bool) bool {
	t.Helper()
	ctx := context.Background()
	keys := make([]oplog.StreamKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	got, err := b.view.AppliedIndexes(ctx, keys)
	require.NoError(t, err)
	for k, st := range want {
		if got[k] != st.Revision-1 {
			return false
		}
	}
	if !indexerToo {
		return true
	}
	got, err = b.index.AppliedIndexes(ctx, keys)
	require.NoError(t, err)
	for k, st := range want {
		if k.Scope == oplog.ScopeDocument && got[k] != st.Revision-1 {
			return false
		}
	}
	return true
}

func (b *bundle) waitCaughtUp(t *testing.T, want map[oplog.StreamKey]*model.StreamState, indexerToo bool) {
	t.Helper()
	b.Eventually(func() bool { return b.caughtUp(t, want, indexerToo) }, 90*time.Second, "projections did not catch up with the log")
}

// requireViewEqualsReplay checks every document of the view against the
// replayed streams: per scope the last index, hash and state; the header.
func (b *bundle) requireViewEqualsReplay(t *testing.T, want map[oplog.StreamKey]*model.StreamState) {
	t.Helper()
	ctx := context.Background()
	type docBranch struct{ id, branch string }
	byDoc := map[docBranch]map[string]*model.StreamState{}
	for k, st := range want {
		db := docBranch{k.DocumentID, k.Branch}
		if byDoc[db] == nil {
			byDoc[db] = map[string]*model.StreamState{}
		}
		byDoc[db][k.Scope] = st
	}
	for db, scopes := range byDoc {
		id := db.id
		d, err := b.view.Get(ctx, id, db.branch)
		require.NoError(t, err)
		require.Len(t, d.Scopes, len(scopes), "scopes of %s", id)
		for scope, st := range scopes {
			got, ok := d.Scopes[scope]
			require.True(t, ok, "%s/%s missing", id, scope)
			require.Equal(t, st.Revision-1, got.LastIndex, "%s/%s last index", id, scope)
			require.Equal(t, st.Hash, got.Hash, "%s/%s hash", id, scope)
			v, err := model.DecodeJSON(got.State)
			require.NoError(t, err)
			require.True(t, model.EqualJSON(st.State, v), "%s/%s state", id, scope)
			require.Equal(t, st.Revision, d.Revision[scope])
		}
		info, ok := model.DocumentInfoOf(scopes[oplog.ScopeDocument])
		require.True(t, ok)
		require.Equal(t, info.Name, d.Name, "name of %s", id)
		require.Equal(t, info.Slug, d.Slug, "slug of %s", id)
		require.Equal(t, info.IsDeleted, d.IsDeleted, "deletion of %s", id)
		require.Equal(t, info.DocumentType, d.DocumentType)
		require.Equal(t, info.Version, d.Version)
	}
}

// requireIndexEqualsReplay checks the indexer's documents and
// relationships against the replayed document scopes, paging in twos.
func (b *bundle) requireIndexEqualsReplay(t *testing.T, want map[oplog.StreamKey]*model.StreamState) {
	t.Helper()
	ctx := context.Background()
	for k, st := range want {
		if k.Scope != oplog.ScopeDocument {
			continue
		}
		info, _ := model.DocumentInfoOf(st)
		d, ok, err := b.index.Get(ctx, k.DocumentID, k.Branch)
		require.NoError(t, err)
		require.True(t, ok, "indexer lacks %s", k.DocumentID)
		require.Equal(t, info.DocumentType, d.DocumentType)
		require.Equal(t, info.IsDeleted, d.IsDeleted)
		require.Equal(t, st.Revision-1, d.LastIndex)
		var wantRels, gotRels []string
		for _, r := range info.Relationships {
			wantRels = append(wantRels, r.Type+">"+r.TargetID)
		}
		cursor := ""
		for {
			page, err := b.index.Outgoing(ctx, k.DocumentID, k.Branch, "", cursor, 2)
			require.NoError(t, err)
			for _, r := range page.Relationships {
				gotRels = append(gotRels, r.Type+">"+r.TargetID)
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
		sort.Strings(wantRels)
		require.Equal(t, wantRels, gotRels, "relationships of %s", k.DocumentID)
	}
}

// dump renders the projection tables (without wall-clock columns) so two
// moments can be compared.
func (b *bundle) dump(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	for _, q := range []string{
		`SELECT document_id, branch, scope, document_type, model_version, state::text, last_index, last_hash, last_modified_utc_ms,
		 name, slug, created_at_utc_ms, is_deleted, deleted_at_utc_ms FROM document_snapshots ORDER BY 1, 2, 3`,
		`SELECT slug, branch, document_id, claimed_at FROM slug_mappings ORDER BY 1, 2`,
		`SELECT document_id, branch, document_type, created_at_utc_ms, is_deleted, deleted_at_utc_ms, last_index FROM documents ORDER BY 1, 2`,
		`SELECT source_id, branch, type, target_id, metadata::text, since_index FROM document_relationships ORDER BY 1, 2, 3, 4`,
		`SELECT projector, document_id, scope, branch, last_index, hash, state::text FROM projector_streams ORDER BY 1, 2, 3, 4`,
		`SELECT projector, document_id, scope, branch, idx FROM quarantined_streams ORDER BY 1, 2, 3, 4`,
	} {
		rows, err := b.Pool.Query(ctx, q)
		require.NoError(t, err)
		for rows.Next() {
			vals, err := rows.Values()
			require.NoError(t, err)
			fmt.Fprintln(&sb, vals...)
		}
		require.NoError(t, rows.Err())
		sb.WriteString("--\n")
	}
	return sb.String()
}

// endOffsets sums the write-ready topic's end offsets, the checkpoint total
// a projector has once it consumed everything.
func (b *bundle) endOffsets(t *testing.T) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := b.Kafka.Admin().ListEndOffsets(ctx, b.Topic)
	require.NoError(t, err)
	var sum int64
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum
}

// groupOffsets sums the offsets a consumer group committed to Kafka.
func (b *bundle) groupOffsets(t *testing.T, group string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offsets, err := b.Kafka.Admin().FetchOffsets(ctx, group)
	require.NoError(t, err)
	var sum int64
	offsets.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// checkpointed sums a projector's checkpoints.
func (b *bundle) checkpointed(t *testing.T, projector string) int64 {
	t.Helper()
	cps, err := b.Store.Checkpoints(context.Background(), projector)
	require.NoError(t, err)
	var sum int64
	for _, c := range cps {
		sum += max(c.NextOffset, 0)
	}
	return sum
}

// startBoth runs both projectors with groups of their own.
func (b *bundle) startBoth(t *testing.T, suffix string) (*projectors.Runner, *projectors.Runner) {
	t.Helper()
	return b.Start(b.Config(docview.Projector{}, "docview"+suffix)), b.Start(b.Config(indexer.Projector{}, "indexer"+suffix))
}

// viewReached reports whether the document view has applied every
// coordinate of the token, as the read store's wait on it decides.
func (b *bundle) viewReached(ctx context.Context, token oplog.ConsistencyToken) (bool, error) {
	return projectors.Reached(ctx, token, docview.Name, b.view.AppliedIndexes, b.Store, nil)
}
