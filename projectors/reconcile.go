package projectors

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// ReconcileReport is what one reconciler pass found and did.
type ReconcileReport struct {
	Documents int // documents compared
	Behind    int // streams whose log head was past the projection's
	Healed    int // operations applied from the log
	Waiting   int // behind streams left alone because they are quarantined
	// Deferred counts behind streams a periodic pass left to the next one:
	// found behind for the first time, or moved since the last pass.
	Deferred int
	// Released counts quarantines lifted because the model they lacked is
	// registered now.
	Released int
	// Quarantined is the number of quarantined streams after the pass.
	Quarantined int
}

// reconcileLoop runs a pass at start (what was lost while the projector was
// down is healed without waiting an interval, and the quarantine gauge is
// set) and then every ReconcileInterval.
//
// A later pass heals a stream only once two passes in a row found it
// behind, the second still short of the head the first saw: a stream
// behind once is most often one whose records are on their way, which the
// consumer is about to apply. Healed at once, it was read from the log and
// replayed twice, by the reconciler and again (skipped) by the consumer,
// which under load lost its held state to the reconciler's write: with 32
// documents of 1 MB the periodic passes took 15% of the process's CPU. A
// lost last record is healed one interval later than it would be.
func (r *Runner) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.ReconcileInterval)
	defer t.Stop()
	first := true
	for {
		_, err := r.reconcileReported(ctx, !first)
		first = false
		if err != nil && ctx.Err() == nil {
			r.m.errors.WithLabelValues(r.name, "reconcile").Inc()
			r.logger.Error("reconcile", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reconcile compares every document's stream heads in the log (every scope
// the projector follows, on every branch) with the projection and heals the
// streams that are behind, page by page: two queries per page of
// documents, whose cost follows the number of streams, not of operations. A lost
// last record of a document has no successor to reveal the gap, so this is
// what brings such a stream up to date. It writes outside any partition's
// fence: it takes the same per-stream locks as the consumer and only ever
// moves a stream forward to what the log holds, so the two cannot conflict.
func (r *Runner) Reconcile(ctx context.Context) (ReconcileReport, error) {
	return r.reconcileReported(ctx, false)
}

// reconcileReported is Reconcile; confirm heals only the streams a previous
// confirming pass found behind too (see reconcileLoop).
func (r *Runner) reconcileReported(ctx context.Context, confirm bool) (ReconcileReport, error) {
	start := time.Now()
	rep, err := r.reconcile(ctx, confirm)
	r.m.stage.WithLabelValues(r.name, "reconcile").Observe(time.Since(start).Seconds())
	r.mu.Lock()
	r.reconcileErr = err
	if err == nil {
		r.lastReconcileAt = time.Now()
		r.quarantined = rep.Quarantined
		r.m.quarantined.Set(float64(rep.Quarantined))
	}
	r.mu.Unlock()
	return rep, err
}

func (r *Runner) reconcile(ctx context.Context, confirm bool) (ReconcileReport, error) {
	var rep ReconcileReport
	if err := r.releaseKnownModels(ctx, &rep); err != nil {
		return rep, err
	}
	// seen becomes the streams this pass found behind, with the log's head
	// then, for the next confirming pass; a failed pass keeps the last.
	seen := map[oplog.StreamKey]int64{}
	cursor := ""
	for {
		page, err := r.cfg.Log.ListDocuments(ctx, cursor, r.cfg.ReconcilePageSize)
		if err != nil {
			return rep, fmt.Errorf("reconcile: list documents after %q: %w", cursor, err)
		}
		if err := r.reconcilePage(ctx, page.DocumentIDs, &rep, confirm, seen); err != nil {
			return rep, err
		}
		if page.Next == "" || len(page.DocumentIDs) == 0 {
			break
		}
		cursor = page.Next
	}
	if confirm {
		r.behind = seen
	}
	qs, err := r.cfg.Store.Quarantines(ctx, r.name)
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	rep.Quarantined = len(qs)
	return rep, nil
}

// releaseKnownModels lifts the quarantines of streams whose operation
// needed a model this process did not know, once the registry has it (a
// rolling upgrade reached this member); the pass that follows heals them.
func (r *Runner) releaseKnownModels(ctx context.Context, rep *ReconcileReport) error {
	qs, err := r.cfg.Store.Quarantines(ctx, r.name)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for _, q := range qs {
		if q.ErrorName != model.NameModelNotFound {
			continue
		}
		ops, err := r.cfg.Log.ReadStream(ctx, q.Stream, q.Index, 1)
		if err != nil {
			return fmt.Errorf("reconcile: read %s at %d: %w", q.Stream, q.Index, err)
		}
		if len(ops) == 0 {
			continue
		}
		if _, err := r.cfg.Registry.Get(ops[0].DocumentType, ops[0].Version); err != nil {
			continue
		}
		if _, err := r.cfg.Store.Release(ctx, r.name, q.Stream); err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		rep.Released++
		r.logger.Info("quarantine released: the model is known now", zap.Stringer("stream", q.Stream),
			zap.String("document_type", ops[0].DocumentType), zap.Int("version", ops[0].Version))
	}
	return nil
}

func (r *Runner) reconcilePage(ctx context.Context, ids []string, rep *ReconcileReport, confirm bool, seen map[oplog.StreamKey]int64) error {
	rep.Documents += len(ids)
	if len(ids) == 0 {
		return nil
	}
	last, err := r.cfg.Store.LastIndexes(ctx, r.name, ids)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	heads, err := r.cfg.Log.Heads(ctx, ids)
	if err != nil {
		return fmt.Errorf("reconcile: stream heads of %d documents: %w", len(ids), err)
	}
	// A projector that did not start at the beginning of the log holds a
	// document only once a record of it came: the others are not behind.
	held := map[string]bool{}
	for k := range last {
		held[k.DocumentID] = true
	}
	w := wants{}
	for k, rev := range heads {
		if rev == 0 || !r.filter.FollowsStream(k) || (!r.cfg.Start.Earliest() && !held[k.DocumentID]) {
			continue
		}
		stored, ok := last[k]
		if !ok {
			stored = -1
		}
		if rev-1 <= stored {
			continue
		}
		if confirm {
			seen[k] = rev - 1
			if was, ok := r.behind[k]; !ok || stored >= was {
				rep.Deferred++
				continue // behind for the first time, or moving: on its way
			}
		}
		// The log's heads carry no document type. A document the
		// projection holds is of a type it follows; another one's type is
		// remembered once read (documentTypes), so a document of a type
		// not followed costs one read per process, not one per pass.
		documentType := ""
		if r.filter.ByType() && !held[k.DocumentID] {
			if documentType, err = r.types.of(ctx, k); err != nil {
				return fmt.Errorf("reconcile: %w", err)
			}
			if !r.filter.FollowsType(documentType) {
				continue
			}
		}
		w.add(k, documentType, rev-1, nil)
	}
	if len(w) == 0 {
		return nil
	}
	rep.Behind += len(w)
	var out outcome
	err = r.cfg.Store.InTx(ctx, nil, func(tx Tx) error {
		var err error
		out, err = r.adv.advance(ctx, tx, w)
		return err
	})
	if err != nil {
		return fmt.Errorf("reconcile: heal %d streams: %w", len(w), err)
	}
	r.adv.committed(out)
	rep.Healed += out.applied
	rep.Waiting += out.waiting
	r.observe(out, "reconciler", 0)
	return nil
}
