package projectors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
)

// A stream quarantined because the projection's stored head was corrupted
// (the log is sound) keeps its later operations waiting while the runner
// consumes their records; lifting it re-verifies the stream from index 0 of
// the log and applies what waited, so the view equals a replay of the log
// exactly, with no reconciler pass and no re-delivery, and the stream moves
// with new records again.
func TestLiftReplaysWhatWaited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	w := b.NewWorkload(31)
	recs := w.Random("l", 6, 30)
	bad, created := w.Create("lift-doc", jsondoc.DocumentType, "lift-slug")
	first, err := w.Job(bad, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"before": true}))
	require.NoError(t, err)
	recs = append(recs, created, first)
	cfg := b.Config(docview.Projector{}, "docview")
	cfg.HeadCacheBytes = -1 // every batch reads the stored head, which the test corrupts
	view := b.Start(cfg)
	b.Publish(recs...)
	want, failed := b.Replay()
	require.Empty(t, failed)
	b.waitCaughtUp(t, want, false)

	badKey := oplog.StreamKey{DocumentID: bad.ID, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	tag, err := b.Pool.Exec(ctx, `UPDATE projector_streams SET state = '{"corrupted":true}' WHERE projector = $1 AND document_id = $2 AND scope = $3 AND branch = $4`,
		docview.Name, badKey.DocumentID, badKey.Scope, badKey.Branch)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	before := want[badKey].Revision - 1

	// Three more jobs on the corrupted stream, and work elsewhere.
	var more = recs[:0:0]
	for i := range 3 {
		rec, err := w.Job(bad, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"after": i}))
		require.NoError(t, err)
		more = append(more, rec)
	}
	more = append(more, w.Random("l2", 3, 10)...)
	b.Publish(more...)
	want, failed = b.Replay()
	require.Empty(t, failed, "the log itself is sound")
	end := b.endOffsets(t)
	b.Eventually(func() bool { return b.checkpointed(t, docview.Name) == end }, 60*time.Second, "the records were not consumed")

	qs, err := b.Store.Quarantines(ctx, docview.Name)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Equal(t, badKey, qs[0].Stream)
	require.Equal(t, before+1, qs[0].Index)
	require.Equal(t, model.NameHashMismatch, qs[0].ErrorName)
	require.WithinDuration(t, time.Now(), qs[0].Since, time.Minute)
	applied, err := b.view.AppliedIndexes(ctx, []oplog.StreamKey{badKey})
	require.NoError(t, err)
	require.Equal(t, before, applied[badKey], "the quarantined stream waits")
	_, err = b.viewReached(ctx, more[2].ConsistencyToken)
	var qe *projectors.QuarantinedError
	require.ErrorAs(t, err, &qe)

	rep, err := projectors.Lift(ctx, cfg, badKey)
	require.NoError(t, err)
	require.Equal(t, badKey, rep.Stream)
	require.Equal(t, before+1, rep.Lifted.Index)
	require.Equal(t, want[badKey].Revision-1, rep.LastIndex)
	require.EqualValues(t, want[badKey].Revision, rep.Replayed, "the whole stream is replayed from index 0")

	qs, err = b.Store.Quarantines(ctx, docview.Name)
	require.NoError(t, err)
	require.Empty(t, qs)
	require.True(t, b.caughtUp(t, want, false), "the lift itself applied what waited")
	b.requireViewEqualsReplay(t, want)
	ok, err := b.viewReached(ctx, more[2].ConsistencyToken)
	require.NoError(t, err)
	require.True(t, ok)

	// The stream moves with new records again.
	next, err := w.Job(bad, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"lifted": true}))
	require.NoError(t, err)
	b.Publish(next)
	want, failed = b.Replay()
	require.Empty(t, failed)
	b.waitCaughtUp(t, want, false)
	b.requireViewEqualsReplay(t, want)
	require.NoError(t, view.Ready())

	// A stream in no quarantine has nothing to lift.
	_, err = projectors.Lift(ctx, cfg, badKey)
	require.ErrorIs(t, err, projectors.ErrNotQuarantined)
}

// A lift of a stream whose log does not verify (a stored hash is wrong) is
// refused with the finding, and changes nothing: the quarantine stays, the
// view keeps the verified prefix.
func TestLiftRefusedWhileTheLogDoesNotVerify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	w := b.NewWorkload(32)
	recs := w.Random("r", 4, 12)
	bad, created := w.Create("refused-doc", jsondoc.DocumentType, "refused-slug")
	recs = append(recs, created)
	badRec, err := w.JobWith(bad, func(ops []oplog.Operation) { ops[0].Hash = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" },
		w.Action(oplog.ScopeDocument, model.ActionSetName, model.SetNameInput{Name: "tampered"}))
	require.NoError(t, err)
	badKey := badRec.Streams[0].Stream
	later, err := w.Job(bad, w.Action(oplog.ScopeDocument, model.ActionSetName, model.SetNameInput{Name: "later"}))
	require.NoError(t, err)
	recs = append(recs, badRec, later)
	cfg := b.Config(indexer.Projector{}, "indexer")
	b.Start(cfg)
	b.Publish(recs...)
	end := b.endOffsets(t)
	b.Eventually(func() bool { return b.checkpointed(t, indexer.Name) == end }, 60*time.Second, "the records were not consumed")
	qs, err := b.Store.Quarantines(ctx, indexer.Name)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	applied, err := b.index.AppliedIndexes(ctx, []oplog.StreamKey{badKey})
	require.NoError(t, err)

	_, err = projectors.Lift(ctx, cfg, badKey)
	var refused *projectors.LiftRefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, badRec.Streams[0].FromIndex, refused.Finding.Index)
	require.Equal(t, model.NameHashMismatch, refused.Finding.ErrorName)
	require.Equal(t, qs[0].Index, refused.Lifted.Index)

	after, err := b.Store.Quarantines(ctx, indexer.Name)
	require.NoError(t, err)
	require.Equal(t, qs, after, "a refused lift changes nothing")
	still, err := b.index.AppliedIndexes(ctx, []oplog.StreamKey{badKey})
	require.NoError(t, err)
	require.Equal(t, applied, still)

	// A scope the projector does not follow is refused up front.
	_, err = projectors.Lift(ctx, cfg, oplog.StreamKey{DocumentID: bad.ID, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
	require.ErrorContains(t, err, "does not follow scope")
}
