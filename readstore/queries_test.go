package readstore_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/record"
)

// Bodies as a client decodes them.
type (
	documentBody struct {
		ID             string           `json:"id"`
		DocumentType   string           `json:"documentType"`
		Name           string           `json:"name"`
		Slug           string           `json:"slug"`
		IsDeleted      bool             `json:"isDeleted"`
		DeletedAtUtcMs *int64           `json:"deletedAtUtcMs"`
		Revision       map[string]int64 `json:"revision"`
		Scopes         map[string]struct {
			Revision int64  `json:"revision"`
			Hash     string `json:"hash"`
			State    any    `json:"state"`
		} `json:"scopes"`
	}
	findBody struct {
		Documents []struct {
			ID           string `json:"id"`
			DocumentType string `json:"documentType"`
			IsDeleted    bool   `json:"isDeleted"`
			Revision     int64  `json:"revision"`
		} `json:"documents"`
		NextCursor string `json:"nextCursor"`
	}
	opsBody struct {
		Revision   int64             `json:"revision"`
		Operations []oplog.Operation `json:"operations"`
		NextSince  *int64            `json:"nextSince"`
	}
	relsBody struct {
		Relationships []struct {
			SourceID   string `json:"sourceId"`
			Type       string `json:"type"`
			TargetID   string `json:"targetId"`
			SinceIndex int64  `json:"sinceIndex"`
		} `json:"relationships"`
	}
	stateBody struct {
		DocumentType  string `json:"documentType"`
		Revision      int64  `json:"revision"`
		Hash          string `json:"hash"`
		State         any    `json:"state"`
		KeyframeIndex *int64 `json:"keyframeIndex"`
		Replayed      int64  `json:"replayedOperations"`
	}
)

// merged is one token holding the coordinates of every job.
func merged(recs []*record.WriteReady) string {
	var t oplog.ConsistencyToken
	for _, r := range recs {
		t.Coordinates = append(t.Coordinates, r.ConsistencyToken.Coordinates...)
	}
	return tokenOf(t)
}

// fixture writes a drive with five child documents (the last deleted), a
// "ref" link between two children and twelve patches on one child's global
// scope, announces every job and runs both projectors.
type fixture struct {
	*bundle
	drv      *projtest.Doc
	children []*projtest.Doc
	token    string
}

func newFixture(t *testing.T) *fixture {
	b := setup(t, readstore.Config{})
	w := b.w
	var recs []*record.WriteReady
	add := func(rec *record.WriteReady, err error) {
		t.Helper()
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	drv, rec := w.Create("drv-1", drive.DocumentType, "my-drive")
	recs = append(recs, rec)
	f := &fixture{bundle: b, drv: drv}
	for i := range 5 {
		c, rec := w.Create(fmt.Sprintf("c-%d", i), jsondoc.DocumentType, "")
		recs = append(recs, rec)
		f.children = append(f.children, c)
		acts, err := drive.AddFileActions(fmt.Sprintf("file-%d", i), 1_700_000_000_000+int64(i), drive.AddFileInput{
			ID: fmt.Sprintf("n%d", i), Name: "file", DocumentID: c.ID,
		})
		require.NoError(t, err)
		add(w.Job(drv, acts...))
	}
	c0 := f.children[0]
	add(w.Job(c0, w.Action(oplog.ScopeDocument, model.ActionAddRelationship, model.RelationshipInput{TargetID: "c-1", Type: "ref"})))
	for i := range 12 {
		add(w.Job(c0, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"n": i, fmt.Sprintf("k%d", i%3): i})))
	}
	add(w.Job(f.children[4], w.Action(oplog.ScopeDocument, model.ActionDeleteDocument, struct{}{})))
	b.env.Publish(recs...)
	b.startProjectors()
	f.token = merged(recs)
	return f
}

func TestQueries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.h
	tok := url.QueryEscape(f.token)

	t.Run("get by id and by slug", func(t *testing.T) {
		// The merged token makes the view catch up with the whole fixture.
		res := get(t, h, "/v1/documents/c-0?wait=30s&consistencyToken="+tok)
		require.Equal(t, 200, res.status, "%s", res.body)
		var d documentBody
		res.decode(t, &d)
		require.Equal(t, "c-0", d.ID)
		require.Equal(t, jsondoc.DocumentType, d.DocumentType)
		require.Equal(t, map[string]int64{"document": 2, "global": 12}, d.Revision)
		want, err := model.Canonical(f.children[0].States[oplog.ScopeGlobal].State)
		require.NoError(t, err)
		got, err := model.Canonical(d.Scopes["global"].State)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got))
		require.Equal(t, f.children[0].States[oplog.ScopeGlobal].Hash, d.Scopes["global"].Hash)

		res = get(t, h, "/v1/documents/my-drive")
		require.Equal(t, 200, res.status, "%s", res.body)
		res.decode(t, &d)
		require.Equal(t, "drv-1", d.ID)
		require.Equal(t, "my-drive", d.Slug)

		res = get(t, h, "/v1/documents/drv-1?scope=document")
		require.Equal(t, 200, res.status)
		d = documentBody{}
		res.decode(t, &d)
		require.Len(t, d.Scopes, 1)
		require.Contains(t, d.Scopes, "document")
		require.Len(t, d.Revision, 2, "the header lists every scope's revision")

		res = get(t, h, "/v1/documents/c-4")
		require.Equal(t, 200, res.status)
		d = documentBody{}
		res.decode(t, &d)
		require.True(t, d.IsDeleted)
		require.NotNil(t, d.DeletedAtUtcMs)

		res = get(t, h, "/v1/documents/nope")
		require.Equal(t, 404, res.status)
		require.Equal(t, readstore.CodeDocumentNotFound, res.apiError(t).Error.Code)
		require.Equal(t, "idOrSlug", res.apiError(t).Error.Field)
	})

	t.Run("find by type with paging", func(t *testing.T) {
		get(t, h, "/v1/documents?wait=30s&consistencyToken="+tok)
		var ids []string
		path := "/v1/documents?type=doclog%2Fjson&limit=2"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5)
			res := get(t, h, path)
			require.Equal(t, 200, res.status, "%s", res.body)
			var page findBody
			res.decode(t, &page)
			for _, d := range page.Documents {
				require.Equal(t, jsondoc.DocumentType, d.DocumentType)
				ids = append(ids, d.ID)
			}
			if page.NextCursor == "" {
				break
			}
			path = "/v1/documents?type=doclog%2Fjson&limit=2&cursor=" + page.NextCursor
		}
		require.Equal(t, []string{"c-0", "c-1", "c-2", "c-3"}, ids, "live documents of the type, in id order, each once")

		res := get(t, h, "/v1/documents?type=doclog%2Fjson&includeDeleted=true&limit=10")
		var page findBody
		res.decode(t, &page)
		require.Len(t, page.Documents, 5)
		require.True(t, page.Documents[4].IsDeleted)
		require.Empty(t, page.NextCursor)

		res = get(t, h, "/v1/documents?limit=10")
		page = findBody{}
		res.decode(t, &page)
		require.Len(t, page.Documents, 5, "the drive and four live children")
	})

	t.Run("find by parent", func(t *testing.T) {
		var ids []string
		path := "/v1/documents?parent=drv-1&limit=3"
		for {
			res := get(t, h, path)
			require.Equal(t, 200, res.status, "%s", res.body)
			var page findBody
			res.decode(t, &page)
			for _, d := range page.Documents {
				ids = append(ids, d.ID)
			}
			if page.NextCursor == "" {
				break
			}
			path = "/v1/documents?parent=drv-1&limit=3&cursor=" + page.NextCursor
		}
		require.Equal(t, []string{"c-0", "c-1", "c-2", "c-3"}, ids)

		res := get(t, h, "/v1/documents?parent=drv-1&type=doclog%2Fdrive")
		var page findBody
		res.decode(t, &page)
		require.Empty(t, page.Documents)

		res = get(t, h, "/v1/documents?parent=drv-1&includeDeleted=true")
		page = findBody{}
		res.decode(t, &page)
		require.Len(t, page.Documents, 5)
	})

	t.Run("relationships in and out", func(t *testing.T) {
		res := get(t, h, "/v1/documents/drv-1/relationships?direction=out")
		require.Equal(t, 200, res.status, "%s", res.body)
		var rels relsBody
		res.decode(t, &rels)
		require.Len(t, rels.Relationships, 5)
		for i, r := range rels.Relationships {
			require.Equal(t, "drv-1", r.SourceID)
			require.Equal(t, model.RelationshipChild, r.Type)
			require.Equal(t, fmt.Sprintf("c-%d", i), r.TargetID)
		}

		res = get(t, h, "/v1/documents/c-1/relationships?direction=in")
		rels = relsBody{}
		res.decode(t, &rels)
		require.Len(t, rels.Relationships, 2)
		require.Equal(t, "c-0", rels.Relationships[0].SourceID)
		require.Equal(t, "ref", rels.Relationships[0].Type)
		require.Equal(t, "drv-1", rels.Relationships[1].SourceID)

		res = get(t, h, "/v1/documents/c-0/relationships")
		rels = relsBody{}
		res.decode(t, &rels)
		require.Len(t, rels.Relationships, 2, "both directions by default")

		res = get(t, h, "/v1/documents/c-0/relationships?direction=out&type=child")
		rels = relsBody{}
		res.decode(t, &rels)
		require.Empty(t, rels.Relationships)

		// Paged: every link once, in order, whatever the page size.
		var keys []string
		path := "/v1/documents/drv-1/relationships?limit=2"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5)
			res := get(t, h, path)
			require.Equal(t, 200, res.status, "%s", res.body)
			var page struct {
				relsBody
				NextCursor string `json:"nextCursor"`
			}
			res.decode(t, &page)
			for _, r := range page.Relationships {
				keys = append(keys, r.SourceID+">"+r.TargetID)
			}
			if page.NextCursor == "" {
				break
			}
			path = "/v1/documents/drv-1/relationships?limit=2&cursor=" + page.NextCursor
		}
		require.Equal(t, []string{"drv-1>c-0", "drv-1>c-1", "drv-1>c-2", "drv-1>c-3", "drv-1>c-4"}, keys)

		res = get(t, h, "/v1/documents/nope/relationships")
		require.Equal(t, 404, res.status)
	})

	t.Run("operations paged from the log", func(t *testing.T) {
		var got []oplog.Operation
		path := "/v1/documents/c-0/operations?limit=5"
		var sinces []int64
		for {
			res := get(t, h, path)
			require.Equal(t, 200, res.status, "%s", res.body)
			var page opsBody
			res.decode(t, &page)
			require.Equal(t, int64(12), page.Revision)
			got = append(got, page.Operations...)
			if page.NextSince == nil {
				break
			}
			sinces = append(sinces, *page.NextSince)
			path = fmt.Sprintf("/v1/documents/c-0/operations?limit=5&since=%d", *page.NextSince)
		}
		require.Equal(t, []int64{5, 10}, sinces)
		require.Len(t, got, 12)
		for i, op := range got {
			require.Equal(t, int64(i), op.Index)
			require.Equal(t, oplog.ScopeGlobal, op.Scope)
		}

		res := get(t, h, "/v1/documents/c-0/operations?scope=document")
		var page opsBody
		res.decode(t, &page)
		require.Len(t, page.Operations, 2)
		require.Equal(t, model.ActionCreateDocument, page.Operations[0].Action.Type)

		res = get(t, h, "/v1/documents/c-0/operations?scope=local")
		page = opsBody{}
		res.decode(t, &page)
		require.Empty(t, page.Operations)
		require.Zero(t, page.Revision)

		res = get(t, h, "/v1/documents/nope/operations")
		require.Equal(t, 404, res.status)
	})

	t.Run("state at past revisions equals a full replay", func(t *testing.T) {
		ctx := t.Context()
		k := oplog.StreamKey{DocumentID: "c-0", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
		ops, err := f.env.Log.ReadStream(ctx, k, 0, 0)
		require.NoError(t, err)
		require.Len(t, ops, 12)
		// A keyframe at index 5 (state after six operations): revisions
		// above 6 start from it, the others replay from index 0.
		kfState, err := f.env.Registry.ReplayStream(k, jsondoc.DocumentType, ops[:6])
		require.NoError(t, err)
		kf, err := kfState.Keyframe()
		require.NoError(t, err)
		require.NoError(t, f.env.Log.PutKeyframe(ctx, kf))

		for rev := int64(1); rev <= 12; rev++ {
			want, err := f.env.Registry.ReplayStream(k, jsondoc.DocumentType, ops[:rev])
			require.NoError(t, err)
			res := get(t, h, fmt.Sprintf("/v1/documents/c-0/state?scope=global&revision=%d", rev))
			require.Equal(t, 200, res.status, "%s", res.body)
			var st stateBody
			res.decode(t, &st)
			require.Equal(t, rev, st.Revision)
			require.Equal(t, want.Hash, st.Hash)
			require.Equal(t, jsondoc.DocumentType, st.DocumentType)
			require.True(t, model.EqualJSON(want.State, st.State), "revision %d: %v != %v", rev, st.State, want.State)
			if rev >= 6 {
				require.NotNil(t, st.KeyframeIndex, "revision %d", rev)
				require.Equal(t, int64(5), *st.KeyframeIndex)
				require.Equal(t, rev-6, st.Replayed)
			} else {
				require.Nil(t, st.KeyframeIndex)
				require.Equal(t, rev, st.Replayed)
			}
		}

		res := get(t, h, "/v1/documents/c-0/state")
		var st stateBody
		res.decode(t, &st)
		require.Equal(t, int64(12), st.Revision, "the head by default")

		// A keyframe whose state does not hash to its hash is never
		// trusted: the state is replayed from index 0 instead.
		bad, err := f.env.Registry.ReplayStream(k, jsondoc.DocumentType, ops[:9])
		require.NoError(t, err)
		badKf, err := bad.Keyframe()
		require.NoError(t, err)
		badKf.State = []byte(`{"n":"forged"}`)
		require.NoError(t, f.env.Log.PutKeyframe(ctx, badKf))
		want, err := f.env.Registry.ReplayStream(k, jsondoc.DocumentType, ops[:10])
		require.NoError(t, err)
		res = get(t, h, "/v1/documents/c-0/state?revision=10")
		require.Equal(t, 200, res.status, "%s", res.body)
		st = stateBody{}
		res.decode(t, &st)
		require.Nil(t, st.KeyframeIndex)
		require.Equal(t, int64(10), st.Replayed)
		require.Equal(t, want.Hash, st.Hash)
		require.True(t, model.EqualJSON(want.State, st.State))

		// The document scope replays with the system reducer.
		dk := oplog.StreamKey{DocumentID: "drv-1", Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}
		dops, err := f.env.Log.ReadStream(ctx, dk, 0, 0)
		require.NoError(t, err)
		dwant, err := f.env.Registry.ReplayStream(dk, drive.DocumentType, dops[:3])
		require.NoError(t, err)
		res = get(t, h, "/v1/documents/drv-1/state?scope=document&revision=3")
		require.Equal(t, 200, res.status, "%s", res.body)
		st = stateBody{}
		res.decode(t, &st)
		require.Equal(t, dwant.Hash, st.Hash)
		require.True(t, model.EqualJSON(dwant.State, st.State))

		res = get(t, h, "/v1/documents/c-0/state?revision=13")
		require.Equal(t, 404, res.status)
		require.Equal(t, readstore.CodeRevisionNotFound, res.apiError(t).Error.Code)
		require.Equal(t, "revision", res.apiError(t).Error.Field)

		res = get(t, h, "/v1/documents/c-0/state?scope=local")
		require.Equal(t, 404, res.status, "an empty scope has no state to rebuild")

		res = get(t, h, "/v1/documents/nope/state")
		require.Equal(t, 404, res.status)
		require.Equal(t, readstore.CodeDocumentNotFound, res.apiError(t).Error.Code)
	})
}
