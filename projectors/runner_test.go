package projectors_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/record"
)

// A random workload projects to exactly what a replay of the log gives, and
// re-delivering the whole topic afterwards changes nothing.
func TestRandomWorkloadEqualsReplayAndRedeliveryChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	recs := b.NewWorkload(1).Random("w", 200, 1000)
	view, index := b.startBoth(t, "")
	b.Publish(recs...)
	want, failed := b.Replay()
	require.Empty(t, failed)
	b.waitCaughtUp(t, want, true)
	b.requireViewEqualsReplay(t, want)
	b.requireIndexEqualsReplay(t, want)
	require.NoError(t, view.Ready())
	require.NoError(t, index.Ready())
	end := b.endOffsets(t)
	b.Eventually(func() bool {
		return b.checkpointed(t, docview.Name) == end && b.checkpointed(t, indexer.Name) == end
	}, 30*time.Second, "checkpoints did not reach the end of the topic")
	before := b.dump(t)

	// Re-deliver everything: forget the checkpoints and run new members
	// of new groups, so nothing remembers where the projectors were.
	require.NoError(t, view.Stop(context.Background()))
	require.NoError(t, index.Stop(context.Background()))
	_, err := b.Pool.Exec(context.Background(), `UPDATE projector_checkpoints SET next_offset = -1`)
	require.NoError(t, err)
	b.startBoth(t, "-again")
	b.Eventually(func() bool {
		return b.checkpointed(t, docview.Name) == end && b.checkpointed(t, indexer.Name) == end
	}, 60*time.Second, "re-delivery was not consumed")
	require.Equal(t, before, b.dump(t), "re-delivery changed a projection")
}

// A projector stopped in the middle of a batch (before its database commit,
// and between the database and the Kafka commit) resumes without losing or
// applying anything twice.
func TestKilledMidBatchResumes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.NewWorkload(2)
	first := w.Random("k", 20, 80)
	b.Publish(first...)

	for _, stage := range []string{"in-transaction", "after-commit"} {
		var batches atomic.Int32
		stopped := make(chan struct{})
		var once sync.Once
		block := func(ctx context.Context) {
			if batches.Add(1) == 3 {
				once.Do(func() { close(stopped) })
				<-ctx.Done()
			}
		}
		cfg := b.Config(docview.Projector{}, "docview")
		cfg.MaxPollRecords = 7 // several batches per partition
		var inTx func(context.Context) error
		var afterTx func(context.Context)
		if stage == "in-transaction" {
			inTx = func(ctx context.Context) error { block(ctx); return ctx.Err() }
		} else {
			afterTx = func(ctx context.Context) { block(ctx) }
		}
		r, err := projectors.NewWithHooks(cfg, inTx, afterTx)
		require.NoError(t, err)
		require.NoError(t, r.Start(context.Background()))
		select {
		case <-stopped:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: the third batch never started", stage)
		}
		require.NoError(t, r.Stop(context.Background())) // the batch is abandoned where it stands
		// More jobs arrive while the projector is down.
		b.Publish(w.Random("k"+stage, 5, 20)...)
	}
	b.Start(b.Config(docview.Projector{}, "docview"))
	want, failed := b.Replay()
	require.Empty(t, failed)
	b.waitCaughtUp(t, want, false)
	b.requireViewEqualsReplay(t, want)
	qs, err := b.Store.Quarantines(context.Background(), docview.Name)
	require.NoError(t, err)
	require.Empty(t, qs, "a double apply would have failed its hash check")
}

// Dropped write-ready records are healed from the log: one in the middle of
// a stream by the next record (gap), a record without operations from the
// log, and the last record of a document, which only the reconciler sees.
func TestDroppedRecordsAreHealed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.NewWorkload(3)
	var recs []*record.WriteReady
	gapDoc, r0 := w.Create("gap", jsondoc.DocumentType, "")
	lastDoc, r1 := w.Create("last", jsondoc.DocumentType, "")
	omitDoc, r2 := w.Create("omit", jsondoc.DocumentType, "")
	recs = append(recs, r0, r1, r2)
	patch := func(d string, n int) *record.WriteReady {
		for _, doc := range w.Docs {
			if doc.ID == d {
				rec, err := w.Job(doc, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"n": n}))
				require.NoError(t, err)
				return rec
			}
		}
		t.Fatalf("no document %s", d)
		return nil
	}
	for n := range 5 {
		g := patch(gapDoc.ID, n)
		if n != 2 { // drop the third patch of "gap"
			recs = append(recs, g)
		}
		o := patch(omitDoc.ID, n)
		o.OperationsOmitted, o.Operations = true, nil
		recs = append(recs, o)
		l := patch(lastDoc.ID, n)
		if n != 4 { // drop the last patch of "last"
			recs = append(recs, l)
		}
	}
	recs = append(recs, w.Random("other", 10, 30)...)
	view := b.Start(b.Config(docview.Projector{}, "docview"))
	b.Publish(recs...)
	want, failed := b.Replay()
	require.Empty(t, failed)
	lastKey := oplog.StreamKey{DocumentID: lastDoc.ID, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	stale := want[lastKey].Clone()
	stale.Revision--
	allButLast := map[oplog.StreamKey]*model.StreamState{}
	for k, st := range want {
		allButLast[k] = st
	}
	allButLast[lastKey] = stale
	b.waitCaughtUp(t, allButLast, false)
	require.False(t, b.caughtUp(t, want, false), "nothing but the reconciler can know of the last record")

	rep, err := view.Reconcile(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, rep.Behind)
	require.Equal(t, 1, rep.Healed)
	require.True(t, b.caughtUp(t, want, false))
	b.requireViewEqualsReplay(t, want)
	rep, err = view.Reconcile(context.Background())
	require.NoError(t, err)
	require.Zero(t, rep.Behind, "a second pass finds nothing")
}

// A member left behind by a rebalance cannot write: once the partition was
// assigned again (its epoch bumped), the old member's batches are fenced
// and write nothing, and it reports itself not ready.
func TestStaleMemberIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	old := b.Start(b.Config(docview.Projector{}, "docview"))
	b.Eventually(func() bool { return len(old.Status().Partitions) == 4 }, 60*time.Second, "the member was not assigned the partitions")

	// Another member takes every partition over while the old one still
	// believes it owns them (it missed the rebalance).
	for p := range int32(4) {
		_, err := b.Store.Assign(ctx, docview.Name, p)
		require.NoError(t, err)
	}
	b.Publish(b.NewWorkload(4).Random("f", 8, 10)...)
	b.Eventually(func() bool {
		for _, p := range old.Status().Partitions {
			if p.Fenced {
				return true
			}
		}
		return false
	}, 60*time.Second, "the stale member was not fenced")
	require.Error(t, old.Ready())
	var n int
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM document_snapshots`).Scan(&n))
	require.Zero(t, n, "a fenced member wrote")
	require.Zero(t, b.checkpointed(t, docview.Name), "a fenced member moved a checkpoint")

	// The store refuses a stale epoch outright.
	cp, err := b.Store.Assign(ctx, docview.Name, 0)
	require.NoError(t, err)
	err = b.Store.InTx(ctx, []projectors.Fence{{Projector: docview.Name, Partition: 0, Epoch: cp.Epoch - 1, NextOffset: 99}}, func(projectors.Tx) error { return nil })
	var fe *projectors.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, cp.Epoch, fe.Current)
}

// An operation whose stored hash disagrees with the recomputed state
// quarantines its stream only: its later operations wait, the document's
// other streams and every other document go on, and a token read on it
// reports the quarantine.
func TestHashMismatchQuarantinesTheStreamOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.NewWorkload(5)
	recs := w.Random("q", 10, 30)
	bad := w.Docs[1]
	badRec, err := w.JobWith(bad, func(ops []oplog.Operation) { ops[0].Hash = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" },
		w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"tampered": true}))
	require.NoError(t, err)
	badKey := badRec.Streams[0].Stream
	badIndex := badRec.Streams[0].FromIndex
	later, err := w.Job(bad, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"after": 1}),
		w.Action(oplog.ScopeDocument, model.ActionSetName, model.SetNameInput{Name: "still moving"}))
	require.NoError(t, err)
	recs = append(recs, badRec, later)
	recs = append(recs, w.Random("q2", 5, 20)...)
	view := b.Start(b.Config(docview.Projector{}, "docview"))
	b.Publish(recs...)

	want, failed := b.Replay()
	require.Len(t, failed, 1)
	var hm *model.HashMismatch
	require.ErrorAs(t, failed[badKey], &hm)
	// Everything else catches up; the bad stream stops before the bad index.
	ops, err := b.Log.ReadStream(context.Background(), badKey, 0, int(badIndex))
	require.NoError(t, err)
	prefix, err := b.Registry.ReplayStream(badKey, bad.Type, ops)
	require.NoError(t, err)
	want[badKey] = prefix
	b.waitCaughtUp(t, want, false)
	b.requireViewEqualsReplay(t, want)

	qs, err := b.Store.Quarantines(context.Background(), docview.Name)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Equal(t, badKey, qs[0].Stream)
	require.Equal(t, badIndex, qs[0].Index)
	require.Equal(t, model.NameHashMismatch, qs[0].ErrorName)

	_, err = b.viewReached(context.Background(), later.ConsistencyToken)
	var qe *projectors.QuarantinedError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, badKey, qe.Stream)
	rep, err := view.Reconcile(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, rep.Waiting)
	require.Equal(t, 1, rep.Quarantined)
	require.Equal(t, 1, view.Status().Quarantined)
	require.NoError(t, view.Ready(), "a quarantine does not stop the other streams")
	ok, err := b.viewReached(context.Background(), recs[len(recs)-1].ConsistencyToken)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, errors.Is(err, context.DeadlineExceeded))
}

// Real rebalances: a second member joins the group and takes partitions
// over, then the first leaves; the projection still equals a replay and
// nothing was applied twice (a double apply fails its hash check).
func TestRebalanceMovesPartitionsWithoutLossOrDoubleApply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.NewWorkload(6)
	first := b.Start(b.Config(docview.Projector{}, "docview"))
	b.Publish(w.Random("r1", 20, 60)...)
	second := b.Start(b.Config(docview.Projector{}, "docview"))
	b.Eventually(func() bool { return len(second.Status().Partitions) > 0 && len(first.Status().Partitions) < 4 },
		60*time.Second, "the second member was not given partitions")
	b.Publish(w.Random("r2", 20, 60)...)
	require.NoError(t, first.Stop(context.Background()))
	b.Eventually(func() bool { return len(second.Status().Partitions) == 4 }, 60*time.Second, "the partitions did not move to the second member")
	b.Publish(w.Random("r3", 10, 40)...)
	want, failed := b.Replay()
	require.Empty(t, failed)
	b.waitCaughtUp(t, want, false)
	b.requireViewEqualsReplay(t, want)
	qs, err := b.Store.Quarantines(context.Background(), docview.Name)
	require.NoError(t, err)
	require.Empty(t, qs)
	require.NoError(t, second.Ready())
	cps, err := b.Store.Checkpoints(context.Background(), docview.Name)
	require.NoError(t, err)
	for _, c := range cps {
		require.GreaterOrEqual(t, c.Epoch, int64(2), "partition %d was assigned twice at least", c.Partition)
	}
}

// A batch that fails for a reason other than its records (here the
// projection's table is missing, as when the database is unreachable) is
// retried, never skipped, and the runner reports it until it goes through.
func TestFailingBatchIsRetriedAndReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.Pool.Exec(ctx, `ALTER TABLE document_snapshots RENAME TO document_snapshots_away`)
	require.NoError(t, err)
	r := b.Start(b.Config(docview.Projector{}, "docview"))
	b.Publish(b.NewWorkload(10).Random("fail", 5, 10)...)
	b.Eventually(func() bool {
		// Reported by its class (an undefined table), not the driver's
		// text: /readyz answers anyone who reaches the ops port.
		err := r.Ready()
		return err != nil && err.Error() == "projector docview: failing and retrying (the server refused (SQLSTATE 42P01))"
	}, 60*time.Second, "the failing batch was not reported")
	require.Zero(t, b.checkpointed(t, docview.Name), "a failing batch moved a checkpoint")

	_, err = b.Pool.Exec(ctx, `ALTER TABLE document_snapshots_away RENAME TO document_snapshots`)
	require.NoError(t, err)
	want, failed := b.Replay()
	require.Empty(t, failed)
	b.waitCaughtUp(t, want, false)
	b.requireViewEqualsReplay(t, want)
	b.Eventually(func() bool { return r.Ready() == nil }, 30*time.Second, "the runner did not recover")
}

// With every record lost, the periodic reconciler alone brings both
// projections to the log.
func TestPeriodicReconcilerHealsWithoutAnyRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.NewWorkload(11).Random("silent", 15, 40) // appended, never announced
	for _, p := range []projectors.Projector{docview.Projector{}, indexer.Projector{}} {
		cfg := b.Config(p, p.Name())
		cfg.ReconcileInterval = 100 * time.Millisecond
		b.Start(cfg)
	}
	want, failed := b.Replay()
	require.Empty(t, failed)
	b.waitCaughtUp(t, want, true)
	b.requireViewEqualsReplay(t, want)
	b.requireIndexEqualsReplay(t, want)
}

// A periodic pass heals a stream only when the pass before found it behind
// too and it has not moved since: once behind, its records are most often
// on their way. An operator's pass (Reconcile) heals at once.
func TestPeriodicReconcilerHealsWhatStaysBehind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cfg := b.Config(docview.Projector{}, "docview")
	cfg.ReconcileInterval = -1 // the test runs the passes
	r := b.Start(cfg)
	b.NewWorkload(13).Random("lost", 6, 20) // appended, never announced
	want, failed := b.Replay()
	require.Empty(t, failed)

	first, err := r.ReconcileConfirming(ctx)
	require.NoError(t, err)
	require.Positive(t, first.Behind+first.Deferred)
	require.Zero(t, first.Healed, "found behind once: left to the records on their way")
	require.Equal(t, len(want), first.Deferred)
	require.False(t, b.caughtUp(t, want, false))

	second, err := r.ReconcileConfirming(ctx)
	require.NoError(t, err)
	require.Equal(t, len(want), second.Behind, "still behind, and unmoved: healed")
	require.Zero(t, second.Deferred)
	require.Positive(t, second.Healed)
	require.True(t, b.caughtUp(t, want, false))
	b.requireViewEqualsReplay(t, want)

	// Behind again: an operator's pass does not wait for a second look.
	b.NewWorkload(14).Random("lost-again", 4, 10)
	want, failed = b.Replay()
	require.Empty(t, failed)
	rep, err := r.Reconcile(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Deferred)
	require.Positive(t, rep.Healed)
	require.True(t, b.caughtUp(t, want, false))
}

// An operation the projector cannot apply (its model is unknown to this
// process) quarantines the stream; once the model is registered, the
// reconciler releases the quarantine and heals the stream from the log.
func TestUnknownModelQuarantinesUntilRegistered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	recs := b.NewWorkload(12).Random("m", 6, 20)
	reg, err := model.NewRegistry(drive.Model()) // no doclog/json
	require.NoError(t, err)
	cfg := b.Config(docview.Projector{}, "docview")
	cfg.Registry = reg
	r := b.Start(cfg)
	b.Publish(recs...)
	want, failed := b.Replay()
	require.Empty(t, failed)
	var jsonStreams int
	for k, st := range want {
		if st.DocumentType == jsondoc.DocumentType && k.Scope != oplog.ScopeDocument {
			jsonStreams++
		}
	}
	require.Positive(t, jsonStreams)
	b.Eventually(func() bool {
		qs, err := b.Store.Quarantines(ctx, docview.Name)
		require.NoError(t, err)
		return len(qs) == jsonStreams
	}, 60*time.Second, "every doclog/json model stream was not quarantined")
	qs, err := b.Store.Quarantines(ctx, docview.Name)
	require.NoError(t, err)
	for _, q := range qs {
		require.Equal(t, model.NameModelNotFound, q.ErrorName, "%s", q.Stream)
	}

	rep, err := r.Reconcile(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Released, "the model is still unknown")
	require.Equal(t, jsonStreams, rep.Waiting)

	require.NoError(t, reg.Register(jsondoc.Model()))
	rep, err = r.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, jsonStreams, rep.Released)
	require.Equal(t, jsonStreams, rep.Behind)
	require.Zero(t, rep.Quarantined)
	require.True(t, b.caughtUp(t, want, false))
	b.requireViewEqualsReplay(t, want)
}

// The Kafka offsets that lag tools read are committed at most every
// OffsetCommitInterval, not once per poll, and still reach the checkpoints
// once the projector is idle: no record has to come to flush them.
func TestKafkaOffsetsCatchUpWhileIdle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.Config(docview.Projector{}, "docview-offsets")
	cfg.OffsetCommitInterval = 300 * time.Millisecond
	b.Start(cfg)
	b.Publish(b.NewWorkload(7).Random("o", 20, 60)...)
	end := b.endOffsets(t)
	b.Eventually(func() bool { return b.checkpointed(t, docview.Name) == end }, 60*time.Second, "the projector did not catch up")

	b.Eventually(func() bool { return b.groupOffsets(t, cfg.Group) == end }, 10*time.Second,
		"the group's committed offsets did not reach the checkpoints while the projector was idle")
}

// The verified-head cache never outranks the stored head: a stream another
// writer moved since this runner last wrote it is read back rather than
// replayed on from memory (which would quarantine it, the held state being
// two operations old), and a stream nobody else touched is replayed on from
// memory.
func TestHeadCacheYieldsToOtherWriters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	w := b.NewWorkload(11)
	merge := func(v map[string]any) *record.WriteReady {
		rec, err := w.Job(w.Docs[0], w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, v))
		require.NoError(t, err)
		return rec
	}
	_, create := w.Create("hc", jsondoc.DocumentType, "")
	reg := prometheus.NewRegistry()
	cfg := b.Config(docview.Projector{}, "docview")
	cfg.Registerer = reg
	b.Start(cfg)
	caughtUp := func() {
		want, failed := b.Replay()
		require.Empty(t, failed)
		b.waitCaughtUp(t, want, false)
		b.requireViewEqualsReplay(t, want)
	}
	b.Publish(create, merge(map[string]any{"a": 1}))
	caughtUp()

	// Two jobs whose records are lost, and another writer (a member that
	// held the partition meanwhile, say) moves the stored head over them:
	// this runner holds the global stream at index 0, the store has it at 2.
	merge(map[string]any{"b": 1})
	merge(map[string]any{"b": 2})
	want, failed := b.Replay()
	require.Empty(t, failed)
	global := oplog.StreamKey{DocumentID: "hc", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	st := want[global]
	state, err := model.Canonical(st.State)
	require.NoError(t, err)
	require.NoError(t, b.Store.InTx(ctx, nil, func(tx projectors.Tx) error {
		n, err := tx.PutHeadsIfNewer(ctx, docview.Name, []projectors.Head{{Stream: global, DocumentType: st.DocumentType,
			LastIndex: st.Revision - 1, Hash: st.Hash, Version: st.Version, State: state}})
		require.Equal(t, 1, n)
		return err
	}))

	b.Publish(merge(map[string]any{"c": 3}))
	caughtUp()
	require.Equal(t, map[string]float64{"miss": 1}, headCacheCounts(t, reg), "the moved head was read back")
	b.Publish(merge(map[string]any{"d": 4}))
	caughtUp()
	require.Equal(t, map[string]float64{"miss": 1, "hit": 1}, headCacheCounts(t, reg), "the head this runner wrote was replayed on from memory")
	qs, err := b.Store.Quarantines(ctx, docview.Name)
	require.NoError(t, err)
	require.Empty(t, qs)
}

// headCacheCounts reads doclog_projector_head_cache_total by result.
func headCacheCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, result := range []string{"hit", "miss"} {
		if v := metric(t, reg, "doclog_projector_head_cache_total", "result", result); v > 0 {
			out[result] = v
		}
	}
	return out
}

// metric reads from reg the value of a counter, or the sample count of a
// histogram, summed over the series whose label has the value (any series
// when label is empty).
func metric(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == label && l.GetValue() == value
			}
			if !match {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				sum += float64(h.GetSampleCount())
			} else {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A poll that brings nothing the projector follows (global-scope jobs, for
// the indexer) writes nothing: its checkpoint waits for the next
// transaction or the commit interval, and is written when the runner
// stops.
func TestIdlePollsDeferTheirCheckpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.NewWorkload(13)
	d, create := w.Create("idle", jsondoc.DocumentType, "")
	reg := prometheus.NewRegistry()
	cfg := b.Config(indexer.Projector{}, "indexer")
	cfg.Registerer = reg
	cfg.OffsetCommitInterval = time.Hour
	r, err := projectors.New(cfg)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	defer func() { require.NoError(t, r.Stop(context.Background())) }()
	b.Publish(create)
	b.Eventually(func() bool { return b.checkpointed(t, indexer.Name) == 1 }, 30*time.Second, "the create job was not checkpointed")

	const jobs = 20
	for i := range jobs {
		rec, err := w.Job(d, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"n": i}))
		require.NoError(t, err)
		b.Publish(rec)
	}
	b.Eventually(func() bool {
		return metric(t, reg, "doclog_projector_job_latency_seconds", "from", "write") == 1+jobs
	}, 30*time.Second, "the runner did not consume the global-scope jobs")
	require.Equal(t, float64(1), metric(t, reg, "doclog_projector_batches_total", "", ""), "a poll with nothing to write ran a transaction")
	require.Equal(t, int64(1), b.checkpointed(t, indexer.Name), "the idle polls' checkpoints wait")

	require.NoError(t, r.Stop(context.Background()))
	require.Equal(t, b.endOffsets(t), b.checkpointed(t, indexer.Name), "stopping writes the deferred checkpoints")
	require.Equal(t, float64(2), metric(t, reg, "doclog_projector_batches_total", "", ""))
}

// Branches are streams of their own: the same documents worked on main and
// on a second branch project side by side, each equal to its replay in the
// document view and the index, neither touching the other.
func TestBranchesProjectApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.NewWorkload(17)
	recs := w.RandomOn("br", "", 8, 60)
	recs = append(recs, w.RandomOn("br", "feature", 8, 60)...)
	b.startBoth(t, "")
	b.Publish(recs...)
	want, failed := b.Replay()
	require.Empty(t, failed)
	branches := map[string]int{}
	for k := range want {
		branches[k.Branch]++
	}
	require.Len(t, branches, 2, "the workload wrote both branches: %v", branches)
	b.waitCaughtUp(t, want, true)
	b.requireViewEqualsReplay(t, want)
	b.requireIndexEqualsReplay(t, want)
}
