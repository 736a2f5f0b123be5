package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/modeltest"
)

func TestKeyframeDue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		before, after, interval int64
		due                     bool
	}{
		{0, 0, 10, false}, {0, 9, 10, false}, {0, 10, 10, true}, {9, 10, 10, true},
		{10, 11, 10, false}, {8, 25, 10, true}, {10, 19, 10, false}, {19, 20, 10, true},
		{4, 4, 1, false}, {4, 5, 1, true}, {0, 1, 1, true},
	} {
		require.Equal(t, c.due, model.KeyframeDue(c.before, c.after, c.interval, 0), "%d -> %d every %d", c.before, c.after, c.interval)
	}
	// One revision at a time, a keyframe is due exactly at each multiple.
	var at []int64
	for rev := int64(0); rev < 35; rev++ {
		if model.KeyframeDue(rev, rev+1, model.DefaultKeyframeInterval, 1<<10) {
			at = append(at, rev+1)
		}
	}
	require.Equal(t, []int64{10, 20, 30}, at)
}

// A large state's keyframes are spaced by its size, so that they add about
// the same bytes per operation to the log whatever the document's size.
func TestKeyframeSpacingGrowsWithTheState(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		size int
		want int64
	}{
		{0, 10}, {1 << 10, 10}, {model.KeyframeBytes - 1, 10}, {model.KeyframeBytes, 20},
		{100 << 10, 10}, {1 << 20, 90}, {10 << 20, 810}, {-1, 10},
	} {
		require.Equal(t, c.want, model.KeyframeSpacing(10, c.size), "state of %d bytes", c.size)
	}
	require.Equal(t, int64(9), model.KeyframeSpacing(1, 1<<20), "an interval of 1 scales too")

	// A stream of 1 MB written one operation at a time: a keyframe at each
	// multiple of 90, and no more keyframe bytes per operation than the
	// interval's share of KeyframeBytes.
	var at []int64
	for rev := int64(0); rev < 200; rev++ {
		if model.KeyframeDue(rev, rev+1, model.DefaultKeyframeInterval, 1<<20) {
			at = append(at, rev+1)
		}
	}
	require.Equal(t, []int64{90, 180}, at)
	perOp := float64(len(at)) * (1 << 20) / 200
	require.LessOrEqual(t, perOp, float64(model.KeyframeBytes)/model.DefaultKeyframeInterval*1.2)
	// One append crossing a multiple still writes one keyframe.
	require.True(t, model.KeyframeDue(85, 95, 10, 1<<20))
	require.False(t, model.KeyframeDue(91, 179, 10, 1<<20))
}

// memLog is a log in memory that counts what a rebuild reads.
type memLog struct {
	ops       []oplog.Operation
	keyframes []oplog.Keyframe // index order
	reads     int
	read      int // operations returned
	failRead  error
}

func (l *memLog) NearestKeyframe(_ context.Context, stream oplog.StreamKey, atOrBelow int64) (oplog.Keyframe, bool, error) {
	for i := len(l.keyframes) - 1; i >= 0; i-- {
		if kf := l.keyframes[i]; kf.Stream == stream && kf.Index <= atOrBelow {
			return kf, true, nil
		}
	}
	return oplog.Keyframe{}, false, nil
}

func (l *memLog) ReadStream(_ context.Context, stream oplog.StreamKey, from int64, limit int) ([]oplog.Operation, error) {
	l.reads++
	if l.failRead != nil {
		return nil, l.failRead
	}
	var out []oplog.Operation
	for _, op := range l.ops {
		if op.Stream() == stream && op.Index >= from && len(out) < limit {
			out = append(out, op)
		}
	}
	l.read += len(out)
	return out, nil
}

// counterLog writes n increments to a counter's global scope.
func counterLog(t *testing.T, n int) (*modeltest.Doc, *memLog, oplog.StreamKey) {
	t.Helper()
	d := modeltest.New(t, counterModels(t), counterType)
	d.Must(doc, model.ActionCreateDocument, map[string]any{"version": 1})
	for i := range n {
		d.Must(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": i + 1})
	}
	ops := d.Ops[oplog.ScopeGlobal]
	return d, &memLog{ops: ops}, ops[0].Stream()
}

func keyframeAt(t *testing.T, d *modeltest.Doc, ops []oplog.Operation, index int) oplog.Keyframe {
	t.Helper()
	st, err := d.Reg.ReplayStream(ops[0].Stream(), counterType, ops[:index+1])
	require.NoError(t, err)
	kf, err := st.Keyframe()
	require.NoError(t, err)
	return kf
}

func TestStateAtFromKeyframe(t *testing.T) {
	t.Parallel()
	d, log, stream := counterLog(t, 25)
	log.keyframes = []oplog.Keyframe{keyframeAt(t, d, log.ops, 9), keyframeAt(t, d, log.ops, 19)}
	ctx := context.Background()

	for rev := int64(0); rev <= 25; rev++ {
		log.reads, log.read = 0, 0
		res, err := d.Reg.StateAt(ctx, log, stream, counterType, rev, 4)
		require.NoError(t, err)
		want, err := d.Reg.ReplayStream(stream, counterType, log.ops[:rev])
		require.NoError(t, err)
		require.Equal(t, rev, res.State.Revision)
		require.Equal(t, want.Hash, res.State.Hash, "revision %d", rev)
		require.True(t, model.EqualJSON(want.State, res.State.State))
		kf := int64(-1)
		switch {
		case rev >= 20:
			kf = 19
		case rev >= 10:
			kf = 9
		}
		require.Equal(t, kf, res.Keyframe, "revision %d", rev)
		require.Equal(t, rev-(kf+1), res.Replayed, "only the operations after the keyframe")
		require.Equal(t, int(res.Replayed), log.read)
		require.Zero(t, res.Abandoned)
		require.NoError(t, res.BadKeyframe)
	}

	// The head: every operation, however many pages.
	log.reads, log.read = 0, 0
	res, err := d.Reg.StateAt(ctx, log, stream, counterType, model.Head, 2)
	require.NoError(t, err)
	require.Equal(t, int64(25), res.State.Revision)
	require.Equal(t, log.ops[24].Hash, res.State.Hash)
	require.Equal(t, int64(19), res.Keyframe)
	require.Equal(t, int64(5), res.Replayed)
	require.Equal(t, 3, log.reads, "pages of 2, 2 and 1: a short page ends the stream")

	// Past the end: the state after the last operation, for the caller to
	// judge.
	res, err = d.Reg.StateAt(ctx, log, stream, counterType, 40, 1000)
	require.NoError(t, err)
	require.Equal(t, int64(25), res.State.Revision)
}

func TestStateAtWithoutKeyframe(t *testing.T) {
	t.Parallel()
	d, log, stream := counterLog(t, 7)
	res, err := d.Reg.StateAt(context.Background(), log, stream, "", model.Head, 1000)
	require.NoError(t, err)
	require.Equal(t, int64(-1), res.Keyframe)
	require.Equal(t, int64(7), res.Replayed)
	require.Equal(t, counterType, res.State.DocumentType, "an unnamed type is the first operation's")
	require.Equal(t, log.ops[6].Hash, res.State.Hash)

	empty := oplog.StreamKey{DocumentID: "none", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	res, err = d.Reg.StateAt(context.Background(), log, empty, counterType, model.Head, 1000)
	require.NoError(t, err)
	require.Zero(t, res.State.Revision)
	require.Equal(t, counterType, res.State.DocumentType)
}

func TestStateAtPassesOverABadKeyframe(t *testing.T) {
	t.Parallel()
	d, log, stream := counterLog(t, 12)
	kf := keyframeAt(t, d, log.ops, 9)
	kf.State = []byte(`{"count":-1}`)
	log.keyframes = []oplog.Keyframe{kf}
	res, err := d.Reg.StateAt(context.Background(), log, stream, counterType, model.Head, 1000)
	require.NoError(t, err)
	require.Equal(t, model.NameHashMismatch, model.ErrorName(res.BadKeyframe))
	require.Equal(t, int64(9), res.BadKeyframeIndex)
	require.Equal(t, int64(-1), res.Keyframe)
	require.Equal(t, int64(12), res.Replayed)
	require.Equal(t, 12, log.read)
	require.Equal(t, log.ops[11].Hash, res.State.Hash)
}

// skipLog is a counter of n increments whose operation n skips the two
// before it.
func skipLog(t *testing.T, n int) (*modeltest.Doc, *memLog, oplog.StreamKey, model.Applied) {
	t.Helper()
	d, log, stream := counterLog(t, n)
	base, err := d.Reg.ReplayStream(stream, counterType, log.ops[:n-2])
	require.NoError(t, err)
	a := d.Action(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": 100})
	base.Revision = int64(n)
	applied, err := d.Reg.Apply(d.Stream(doc), base, &a)
	require.NoError(t, err)
	log.ops = append(log.ops, oplog.Operation{OpID: "x", JobID: "j", DocumentID: d.ID, DocumentType: counterType, Scope: oplog.ScopeGlobal,
		Branch: d.Branch, Index: int64(n), Skip: 2, Hash: applied.Hash, Version: 1, Action: a})
	return d, log, stream, applied
}

// A skip that reaches before the keyframe restarts the replay from index 0.
func TestStateAtSkipBeforeKeyframe(t *testing.T) {
	t.Parallel()
	d, log, stream, applied := skipLog(t, 4)
	log.keyframes = []oplog.Keyframe{keyframeAt(t, d, log.ops, 2)}
	res, err := d.Reg.StateAt(context.Background(), log, stream, counterType, model.Head, 1000)
	require.NoError(t, err)
	require.Equal(t, int64(-1), res.Keyframe)
	require.Zero(t, res.Abandoned, "the page holding the skip is not counted")
	require.Equal(t, int64(5), res.Replayed)
	require.Equal(t, map[string]any{"count": 103.0}, res.State.State)
	require.Equal(t, applied.Hash, res.State.Hash)

	// Replay proves a skip within the operations of one call, so a skip
	// reaching before its page restarts from index 0 too: pages 1-3 from the
	// keyframe at 0 are abandoned, then 0-2 and 3-5 replay.
	d, log, stream, applied = skipLog(t, 5)
	log.keyframes = []oplog.Keyframe{keyframeAt(t, d, log.ops, 0)}
	res, err = d.Reg.StateAt(context.Background(), log, stream, counterType, model.Head, 3)
	require.NoError(t, err)
	require.Equal(t, int64(-1), res.Keyframe)
	require.Equal(t, int64(3), res.Abandoned)
	require.Equal(t, int64(6), res.Replayed)
	require.Equal(t, applied.Hash, res.State.Hash)
}

func TestStateAtErrors(t *testing.T) {
	t.Parallel()
	d, log, stream := counterLog(t, 5)
	ctx := context.Background()

	// A stored hash the replay does not reproduce.
	log.ops[3].Hash = "forged"
	res, err := d.Reg.StateAt(ctx, log, stream, counterType, model.Head, 2)
	require.Equal(t, model.NameHashMismatch, model.ErrorName(err))
	require.Equal(t, int64(2), res.Replayed, "the page before the forged hash was replayed")
	require.Nil(t, res.State)

	log.failRead = errors.New("connection refused")
	_, err = d.Reg.StateAt(ctx, log, stream, counterType, model.Head, 2)
	require.ErrorContains(t, err, "read doc-TestStateAtErrors/global/main from index 0: connection refused")

	_, err = d.Reg.StateAt(ctx, log, stream, counterType, model.Head, 0)
	require.ErrorContains(t, err, "page size must be at least 1")
}
