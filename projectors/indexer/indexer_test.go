package indexer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/record"
)

func TestQueriesPageAndHonourTokens(t *testing.T) {
	t.Parallel()
	env := projtest.New(t, indexer.Migrations())
	env.Start(env.Config(indexer.Projector{}, "indexer"))
	index := indexer.NewIndex(env.Pool, env.Store)
	ctx := context.Background()
	w := env.NewWorkload(8)
	var recs []*record.WriteReady
	root, rec := w.Create("drive", drive.DocumentType, "")
	recs = append(recs, rec)
	var files []*projtest.Doc
	for i := range 5 {
		f, rec := w.Create(fmt.Sprintf("file-%d", i), jsondoc.DocumentType, "")
		files = append(files, f)
		recs = append(recs, rec)
		acts, err := drive.AddFileActions(fmt.Sprintf("add-%d", i), int64(1_800_000_000_000+i), drive.AddFileInput{
			ID: fmt.Sprintf("node-%d", i), Name: "file", DocumentID: f.ID,
		})
		require.NoError(t, err)
		rec, err = w.Job(root, acts...)
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	rec, err := w.Job(files[0], w.Action(oplog.ScopeDocument, model.ActionAddRelationship,
		model.RelationshipInput{TargetID: files[1].ID, Type: "ref", Metadata: []byte(`{"why":"test"}`)}))
	require.NoError(t, err)
	recs = append(recs, rec)
	rec, err = w.Job(root, w.Action(oplog.ScopeDocument, model.ActionRemoveRelationship, model.RelationshipInput{TargetID: files[4].ID}))
	require.NoError(t, err)
	recs = append(recs, rec)
	rec, err = w.Job(files[3], w.Action(oplog.ScopeDocument, model.ActionDeleteDocument, struct{}{}))
	require.NoError(t, err)
	recs = append(recs, rec)
	last, err := w.Job(files[2], w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"a": 1}))
	require.NoError(t, err)
	recs = append(recs, last)
	env.Publish(recs...)
	for _, r := range recs {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		require.NoError(t, index.Wait(ctx, r.ConsistencyToken, 10*time.Millisecond))
		cancel()
	}
	ok, err := index.Reached(ctx, last.ConsistencyToken)
	require.NoError(t, err)
	require.True(t, ok, "a global coordinate does not bear on the index")
	ok, err = index.Reached(ctx, oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{{DocumentID: "drive", Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch, Index: 99}}})
	require.NoError(t, err)
	require.False(t, ok)

	// Children in pages of two: files 0..3 (4 was removed, 3 is deleted but
	// still linked).
	var children []string
	cursor := ""
	for {
		page, err := index.Children(ctx, "drive", oplog.DefaultBranch, cursor, 2)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Relationships), 2)
		for _, r := range page.Relationships {
			children = append(children, r.TargetID)
			require.Equal(t, model.RelationshipChild, r.Type)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	require.Equal(t, []string{"file-0", "file-1", "file-2", "file-3"}, children)

	in, err := index.Incoming(ctx, "file-1", oplog.DefaultBranch, "", "", 10)
	require.NoError(t, err)
	require.Len(t, in.Relationships, 2)
	require.Equal(t, "drive", in.Relationships[0].SourceID)
	require.Equal(t, "file-0", in.Relationships[1].SourceID)
	require.JSONEq(t, `{"why":"test"}`, string(in.Relationships[1].Metadata))
	require.Empty(t, in.Next)

	var found []string
	cursor = ""
	for {
		page, err := index.FindByType(ctx, jsondoc.DocumentType, oplog.DefaultBranch, cursor, 3)
		require.NoError(t, err)
		for _, d := range page.Documents {
			found = append(found, d.ID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	require.Equal(t, []string{"file-0", "file-1", "file-2", "file-4"}, found, "deleted documents are not listed")
	d, ok, err := index.Get(ctx, "file-3", oplog.DefaultBranch)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, d.IsDeleted)
}
