package projectors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/record"
)

// recorder is a projector that needs no history: it remembers which
// documents it was handed, and from which index.
type recorder struct {
	name string
	mu   sync.Mutex
	from map[oplog.StreamKey]int64 // the lowest From of each stream's changes
}

func (r *recorder) Name() string              { return r.name }
func (r *recorder) Filter() projectors.Filter { return projectors.Filter{} }
func (r *recorder) Apply(_ context.Context, _ projectors.Tx, changes []projectors.Change) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range changes {
		if f, ok := r.from[ch.Stream]; !ok || ch.From < f {
			r.from[ch.Stream] = ch.From
		}
	}
	return nil
}

func (r *recorder) documents() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for k := range r.from {
		out[k.DocumentID] = true
	}
	return out
}

// allCheckpointed reports whether the projector has a checkpoint on every
// partition of the topic and they sum to want.
func allCheckpointed(t *testing.T, b *bundle, projector string, want int64) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := b.Kafka.Admin().ListEndOffsets(ctx, b.Topic)
	require.NoError(t, err)
	n := 0
	ends.Each(func(kadm.ListedOffset) { n++ })
	cps, err := b.Store.Checkpoints(ctx, projector)
	require.NoError(t, err)
	var sum int64
	for _, c := range cps {
		if c.NextOffset < 0 {
			return false
		}
		sum += c.NextOffset
	}
	return len(cps) == n && sum == want
}

// A projector started at the end of the topic, or at a time, holds only the
// documents written to since: one touched again appears whole (healed from
// index 0 of the log), the others stay absent, even after a reconciler pass.
// The start found on first assignment is stored as the checkpoint, so a
// restart resumes there and loses nothing written while it was down. Started
// at the beginning (the default) it holds everything.
func TestStartPosition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	w := b.NewWorkload(41)
	old := make([]*projtest.Doc, 3)
	var before []*record.WriteReady
	for i, id := range []string{"old-0", "old-1", "old-2"} {
		d, rec := w.Create(id, jsondoc.DocumentType, "")
		old[i] = d
		before = append(before, rec)
		more, err := w.Job(d, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"v": i}))
		require.NoError(t, err)
		before = append(before, more)
	}
	b.Publish(before...)
	end1 := b.endOffsets(t)
	time.Sleep(20 * time.Millisecond)
	cut := time.Now()
	time.Sleep(20 * time.Millisecond)

	latest := &recorder{name: "from-latest", from: map[oplog.StreamKey]int64{}}
	cfgLatest := b.Config(latest, "from-latest")
	cfgLatest.Start = projectors.StartLatest
	runLatest := b.Start(cfgLatest)
	b.Eventually(func() bool { return allCheckpointed(t, b, latest.name, end1) }, 60*time.Second,
		"the start at the end of the topic was not stored as the checkpoints")

	touch, err := w.Job(old[1], w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"touched": true}))
	require.NoError(t, err)
	fresh, rec := w.Create("new-0", jsondoc.DocumentType, "")
	b.Publish(touch, rec)
	end2 := b.endOffsets(t)
	b.Eventually(func() bool { return allCheckpointed(t, b, latest.name, end2) }, 60*time.Second, "the new records were not consumed")

	want := map[string]bool{old[1].ID: true, fresh.ID: true}
	require.Equal(t, want, latest.documents(), "only the documents written to since the start")
	touched := oplog.StreamKey{DocumentID: old[1].ID, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	require.EqualValues(t, -1, latest.from[touched], "a touched document is healed from index 0")
	got, err := b.Store.LastIndexes(ctx, latest.name, []string{old[0].ID, old[1].ID, old[2].ID})
	require.NoError(t, err)
	require.EqualValues(t, 1, got[touched])
	require.Len(t, got, 1, "the touched stream only, so far")

	// The reconciler brings in the touched document's other scope, and
	// nothing of the untouched documents.
	rep, err := runLatest.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Behind, "the touched document's document scope")
	require.Equal(t, want, latest.documents())
	got, err = b.Store.LastIndexes(ctx, latest.name, []string{old[0].ID, old[1].ID, old[2].ID})
	require.NoError(t, err)
	require.Len(t, got, 2)
	rep, err = runLatest.Reconcile(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Behind)

	// Stopped, then written to, then started again: it resumes from its
	// checkpoint, not from a later end of the topic.
	require.NoError(t, runLatest.Stop(context.Background()))
	again, err := w.Job(old[2], w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"while": "down"}))
	require.NoError(t, err)
	b.Publish(again)
	end3 := b.endOffsets(t)
	b.Start(cfgLatest)
	b.Eventually(func() bool { return allCheckpointed(t, b, latest.name, end3) }, 60*time.Second, "the restarted runner did not consume")
	require.True(t, latest.documents()[old[2].ID], "a record written while it was down is consumed")

	// From a time between the two writes: the same documents as latest
	// saw before its restart, plus the one written while it was down.
	at := &recorder{name: "from-time", from: map[oplog.StreamKey]int64{}}
	cfgAt := b.Config(at, "from-time")
	cfgAt.Start = projectors.StartAt(cut)
	b.Start(cfgAt)
	b.Eventually(func() bool { return allCheckpointed(t, b, at.name, end3) }, 60*time.Second, "the runner from a time did not consume")
	require.Equal(t, map[string]bool{old[1].ID: true, old[2].ID: true, fresh.ID: true}, at.documents())

	// From the beginning (the default): everything.
	all := &recorder{name: "from-start", from: map[oplog.StreamKey]int64{}}
	b.Start(b.Config(all, "from-start"))
	b.Eventually(func() bool { return b.checkpointed(t, all.name) == end3 }, 60*time.Second, "the runner from the start did not consume")
	require.Len(t, all.documents(), 4)
}

// The document view and the indexer serve every document, so they refuse
// to start anywhere but the beginning; the positions parse and print back.
func TestStartPositionRefusedByReadModels(t *testing.T) {
	t.Parallel()
	for _, p := range []projectors.Projector{docview.Projector{}, indexer.Projector{}} {
		cfg := validConfig(t)
		cfg.Projector = p
		cfg.Start = projectors.StartLatest
		require.ErrorContains(t, cfg.WithDefaults().Validate(), "starts at the beginning of the log, not latest")
		cfg.Start = projectors.StartPosition{}
		require.NoError(t, cfg.WithDefaults().Validate())
	}
	for _, s := range []string{"earliest", "latest", "2026-01-02T15:04:05Z"} {
		p, err := projectors.ParseStartPosition(s)
		require.NoError(t, err)
		require.Equal(t, s, p.String())
	}
	p, err := projectors.ParseStartPosition("")
	require.NoError(t, err)
	require.True(t, p.Earliest())
	_, err = projectors.ParseStartPosition("yesterday")
	require.ErrorContains(t, err, "earliest, latest or an RFC 3339 time")
}
