package projectors_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/projtest"
)

// storedHead is a projector_streams row as the runner left it.
type storedHead struct {
	last       int64
	stateIndex *int64
	stateHash  *string
	state      string
}

func readStoredHead(t *testing.T, b *bundle, projector string, k oplog.StreamKey) storedHead {
	t.Helper()
	var h storedHead
	require.NoError(t, b.Pool.QueryRow(context.Background(), `SELECT last_index, state_index, state_hash, state::text FROM projector_streams
WHERE projector = $1 AND document_id = $2 AND scope = $3 AND branch = $4`, projector, k.DocumentID, k.Scope, k.Branch).
		Scan(&h.last, &h.stateIndex, &h.stateHash, &h.state))
	return h
}

// A state of model.KeyframeBytes or more goes with a stored head only every
// so often (the spacing of the log's keyframes). A runner that does not hold
// the stream in memory rebuilds its head from the older state and the log,
// every hash checked, and applies nothing twice; a stored state that does
// not replay to the head's hash quarantines the stream as CorruptHead.
func TestLargeStatesAreStoredEverySoOften(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	w := b.NewWorkload(17)
	big, createBig := w.Create("big", jsondoc.DocumentType, "")
	other, createOther := w.Create("other", jsondoc.DocumentType, "")
	merge := func(d *projtest.Doc, v map[string]any) {
		t.Helper()
		rec, err := w.Job(d, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, v))
		require.NoError(t, err)
		b.Publish(rec)
	}
	caughtUp := func() {
		t.Helper()
		want, failed := b.Replay()
		require.Empty(t, failed)
		b.waitCaughtUp(t, want, false)
		b.requireViewEqualsReplay(t, want)
	}
	filler := strings.Repeat("x", 200_000) // spacing 10 × (1 + 200,000/128 KiB) = 20
	spacing := model.KeyframeSpacing(10, 200_000)
	require.EqualValues(t, 20, spacing)

	first, err := projectors.New(b.Config(docview.Projector{}, "docview"))
	require.NoError(t, err)
	require.NoError(t, first.Start(context.Background()))
	b.Publish(createBig, createOther)
	merge(big, map[string]any{"filler": filler})
	merge(other, map[string]any{"filler": filler})
	for i := range 25 {
		merge(big, map[string]any{"n": i})
		if i < 23 {
			merge(other, map[string]any{"n": i})
		}
		caughtUp()
	}
	global := func(d *projtest.Doc) oplog.StreamKey {
		return oplog.StreamKey{DocumentID: d.ID, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	}
	for _, d := range []*projtest.Doc{big, other} {
		h := readStoredHead(t, b, docview.Name, global(d))
		require.NotNil(t, h.stateIndex, "%s: the last head went without its state", d.ID)
		require.Greater(t, *h.stateIndex, int64(0), "%s: a state was stored after the first", d.ID)
		require.Less(t, *h.stateIndex, h.last)
		require.Less(t, h.last-*h.stateIndex, spacing)
		ops, err := b.Log.ReadStream(ctx, global(d), *h.stateIndex, 1)
		require.NoError(t, err)
		require.Equal(t, ops[0].Hash, *h.stateHash)
		require.Equal(t, ops[0].Hash, model.HashBytes([]byte(h.state)), "%s: the stored state is the one after its index", d.ID)
		doc := readStoredHead(t, b, docview.Name, oplog.StreamKey{DocumentID: d.ID, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch})
		require.Nil(t, doc.stateIndex, "a document scope's state goes with every head")
	}
	require.NoError(t, first.Stop(context.Background()))

	// The stored state of "other" is tampered with: it no longer replays
	// to its head.
	otherHead := readStoredHead(t, b, docview.Name, global(other))
	_, err = b.Pool.Exec(ctx, `UPDATE projector_streams SET state = '{"filler":"y"}' WHERE projector = $1 AND document_id = 'other' AND scope = 'global'`, docview.Name)
	require.NoError(t, err)

	// A new runner holds nothing in memory: both streams are read back.
	reg := prometheus.NewRegistry()
	cfg := b.Config(docview.Projector{}, "docview")
	cfg.Registerer = reg
	b.Start(cfg)
	merge(big, map[string]any{"after": 1})
	merge(other, map[string]any{"after": 1})
	otherKey := global(other)
	want, failed := b.Replay()
	require.Empty(t, failed)
	bigDoc := map[oplog.StreamKey]*model.StreamState{}
	for k, st := range want {
		if k.DocumentID == big.ID {
			bigDoc[k] = st
		}
	}
	b.waitCaughtUp(t, bigDoc, false)
	b.requireViewEqualsReplay(t, bigDoc)
	var qs []projectors.Quarantine
	b.Eventually(func() bool {
		qs, err = b.Store.Quarantines(ctx, docview.Name)
		require.NoError(t, err)
		return len(qs) > 0
	}, 60*time.Second, "the tampered stream was not quarantined")
	require.Len(t, qs, 1, "the big stream replayed from its stored state; the tampered one did not")
	require.Equal(t, otherKey, qs[0].Stream)
	require.Equal(t, otherHead.last+1, qs[0].Index)
	require.Equal(t, "CorruptHead", qs[0].ErrorName)
	require.Contains(t, qs[0].Reason, "from the state stored at index")
	require.GreaterOrEqual(t, headCacheCounts(t, reg)["miss"], float64(2), "both heads were read back")
	require.Equal(t, otherHead.last, readStoredHead(t, b, docview.Name, otherKey).last, "nothing moved the tampered stream")
}
