package docview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/record"
)

type testBundle struct {
	env  *projtest.Env
	w    *projtest.Workload
	view *docview.View
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	env := projtest.New(t, docview.Migrations())
	env.Start(env.Config(docview.Projector{}, "docview"))
	return &testBundle{env: env, w: env.NewWorkload(7), view: docview.NewView(env.Pool, env.Store)}
}

// publish announces a job and waits until the view has reached its token,
// so jobs on different partitions apply in the order the test wrote them.
func (b *testBundle) publish(t *testing.T, rec *record.WriteReady) {
	t.Helper()
	b.env.Publish(rec)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, b.view.Wait(ctx, rec.ConsistencyToken, 10*time.Millisecond))
}

func (b *testBundle) create(t *testing.T, id, slug string) *projtest.Doc {
	t.Helper()
	d, rec := b.w.Create(id, jsondoc.DocumentType, slug)
	b.publish(t, rec)
	return d
}

func (b *testBundle) job(t *testing.T, d *projtest.Doc, a oplog.Action) {
	t.Helper()
	rec, err := b.w.Job(d, a)
	require.NoError(t, err)
	b.publish(t, rec)
}

func (b *testBundle) owner(t *testing.T, slug string) string {
	t.Helper()
	id, ok, err := b.view.SlugOwner(context.Background(), slug, oplog.DefaultBranch)
	require.NoError(t, err)
	if !ok {
		return ""
	}
	return id
}

func TestSlugsAreNeverTakenNorResurrected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	setSlug := func(slug string) oplog.Action {
		return b.w.Action(oplog.ScopeDocument, model.ActionSetSlug, model.SetSlugInput{Slug: slug})
	}
	a := b.create(t, "a", "alpha")
	bee := b.create(t, "b", "beta")
	require.Equal(t, "a", b.owner(t, "alpha"))

	// A live document's slug is not taken by another.
	b.job(t, bee, setSlug("alpha"))
	require.Equal(t, "a", b.owner(t, "alpha"))
	require.Empty(t, b.owner(t, "beta"), "b released beta when it moved on")
	got, err := b.view.GetBySlug(ctx, "alpha", oplog.DefaultBranch)
	require.NoError(t, err)
	require.Equal(t, "a", got.ID)

	// A deleted document keeps its slug for good.
	b.job(t, a, b.w.Action(oplog.ScopeDocument, model.ActionDeleteDocument, struct{}{}))
	got, err = b.view.GetBySlug(ctx, "alpha", oplog.DefaultBranch)
	require.NoError(t, err)
	require.Equal(t, "a", got.ID)
	require.True(t, got.IsDeleted)
	require.NotZero(t, got.DeletedAtUtcMs)
	b.create(t, "c", "alpha")
	require.Equal(t, "a", b.owner(t, "alpha"), "a deleted document's slug is not resurrected")

	// A slug a live document left is free for another.
	b.job(t, bee, setSlug("gamma"))
	require.Equal(t, "b", b.owner(t, "gamma"))
	d := b.create(t, "d", "")
	b.job(t, d, setSlug("beta"))
	require.Equal(t, "d", b.owner(t, "beta"))
}

func TestGetAndReadReady(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.view.Get(ctx, "missing", oplog.DefaultBranch)
	var nf *docview.NotFoundError
	require.ErrorAs(t, err, &nf)
	_, err = b.view.GetBySlug(ctx, "nope", oplog.DefaultBranch)
	require.ErrorAs(t, err, &nf)

	d := b.create(t, "doc", "the-doc")
	rec, err := b.w.Job(d, b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"x": 1}),
		b.w.Action(oplog.ScopeLocal, jsondoc.ActionMergePatch, map[string]any{"y": 2}))
	require.NoError(t, err)
	results, err := b.env.Log.JobResults(ctx, []string{rec.JobID})
	require.NoError(t, err)
	result := results[rec.JobID]
	status, err := b.view.JobStatus(ctx, result)
	require.NoError(t, err)
	require.Equal(t, oplog.JobWriteReady, status, "not announced yet, so not read-ready")

	b.publish(t, rec)
	status, err = b.view.JobStatus(ctx, result)
	require.NoError(t, err)
	require.Equal(t, oplog.JobReadReady, status)
	got, err := b.view.Get(ctx, "doc", oplog.DefaultBranch)
	require.NoError(t, err)
	require.Equal(t, jsondoc.DocumentType, got.DocumentType)
	require.Equal(t, "the-doc", got.Slug)
	require.Equal(t, "doc doc", got.Name)
	require.Equal(t, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 1, oplog.ScopeLocal: 1}, got.Revision)
	require.JSONEq(t, `{"x":1}`, string(got.Scopes[oplog.ScopeGlobal].State))
	require.Equal(t, rec.Streams[0].Hashes[0], got.Scopes[rec.Streams[0].Stream.Scope].Hash)
	require.Positive(t, got.LastModifiedUtcMs)
}

// A state of 64 KiB and more is upserted in a statement of its own: in one
// batch with small ones, both are stored, a later operation replaces it,
// and a redelivered older head does not lower it.
func TestLargeAndSmallStatesInOneBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := b.create(t, "big", "big")
	big := make(map[string]any, 1200)
	for i := range 1200 {
		big[fmt.Sprintf("item-%04d", i)] = map[string]any{"title": "a record of moderate length", "n": i}
	}
	first, err := b.w.Job(d, b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, big),
		b.w.Action(oplog.ScopeLocal, jsondoc.ActionMergePatch, map[string]any{"y": 2}))
	require.NoError(t, err)
	b.publish(t, first)
	got, err := b.view.Get(ctx, "big", oplog.DefaultBranch)
	require.NoError(t, err)
	global := got.Scopes[oplog.ScopeGlobal]
	require.Greater(t, len(global.State), 64<<10, "the global state is large")
	var state map[string]any
	require.NoError(t, json.Unmarshal(global.State, &state))
	require.Len(t, state, 1200)
	require.JSONEq(t, `{"y":2}`, string(got.Scopes[oplog.ScopeLocal].State))
	require.Equal(t, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 1, oplog.ScopeLocal: 1}, got.Revision)

	second, err := b.w.Job(d, b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"item-0007": map[string]any{"n": -7}}))
	require.NoError(t, err)
	b.publish(t, second)
	b.env.Publish(first) // redelivered: its heads are older than the stored ones
	b.publish(t, second)
	got, err = b.view.Get(ctx, "big", oplog.DefaultBranch)
	require.NoError(t, err)
	global = got.Scopes[oplog.ScopeGlobal]
	require.NoError(t, json.Unmarshal(global.State, &state))
	require.Equal(t, map[string]any{"title": "a record of moderate length", "n": -7.0}, state["item-0007"])
	require.Equal(t, second.Streams[0].Hashes[0], global.Hash)
	require.EqualValues(t, 2, got.Revision[oplog.ScopeGlobal])
}
