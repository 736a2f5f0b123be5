package executor

import (
	"context"
	"fmt"
	"slices"

	"github.com/doclog/doclog/executor/place"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// storedPage is how many operations loadStored reads per round trip.
const storedPage = 1000

// heldLookup is what reading only the end of a long stream asks of the log
// besides its operations and keyframes: which of a load's operation ids the
// stream holds before the part read, and at which indexes. A log without it
// has every stream placed in read from index 0.
type heldLookup interface {
	HeldBefore(ctx context.Context, stream oplog.StreamKey, before int64, opIDs []string) (map[string][]int64, error)
}

// loadStored reads, for every job placed by timestamp (a load job, or a job
// of a model that asks for it), what placement needs of each stream it
// places in, up to the head loaded (stage: load): the operations within the
// skip threshold's reach of the head, from the keyframe before it (place.Window),
// the state before them, and where the load's operation ids occur before
// them. A placement may supersede stored
// operations and re-derive the states after them, which the head alone
// cannot give, but never further back than the threshold. A document whose
// read fails joins loadErr; the first unavailable error is returned for the
// batch.
func (e *Executor) loadStored(ctx context.Context, docs []*docWork, loadErr map[*docWork]error) error {
	var unavailable error
	for _, dw := range docs {
		if loadErr[dw] != nil {
			continue
		}
		var keys []oplog.StreamKey
		ids := map[oplog.StreamKey][]string{}
		for _, p := range dw.jobs {
			if p.fail != nil {
				continue
			}
			for _, k := range e.reducer.NeedsStored(dw.id, p.job) {
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
			for i := range p.job.Operations {
				op := &p.job.Operations[i]
				k := oplog.StreamKey{DocumentID: dw.id, Scope: op.Action.Scope, Branch: p.job.BranchOrDefault()}
				ids[k] = append(ids[k], op.OpID)
			}
		}
		for _, k := range keys {
			if _, ok := dw.stored[k]; ok {
				continue
			}
			head := dw.heads[k]
			if head == nil {
				continue // reduce fails the job: its scope was not loaded
			}
			st, err := e.readStored(ctx, k, head, ids[k])
			if err != nil {
				if isUnavailable(err) && unavailable == nil {
					unavailable = err
				}
				loadErr[dw] = fmt.Errorf("load the operations of %s: %w", k, err)
				break
			}
			if dw.stored == nil {
				dw.stored = map[oplog.StreamKey]*place.Stored{}
			}
			dw.stored[k] = st
		}
	}
	return unavailable
}

// readStored reads what a placement in stream k at head needs; ids are the
// operation ids of the loads placed in it. The window starts after the
// nearest keyframe before WindowStart, whose state (its hash checked) is
// the state before it; with no keyframe there, at index 0. A skip reaching
// before the window moves its start back, and the state there is rebuilt
// from the nearest keyframe with every hash checked.
func (e *Executor) readStored(ctx context.Context, k oplog.StreamKey, head *model.StreamState, ids []string) (*place.Stored, error) {
	rev := head.Revision
	held, bounded := e.cfg.Store.(heldLookup)
	var (
		start  int64
		before *model.StreamState
	)
	if w := place.WindowStart(rev, e.cfg.MaxSkipThreshold); bounded && w > 0 {
		rctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
		kf, ok, err := e.cfg.Store.NearestKeyframe(rctx, k, w-1)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read the nearest keyframe of %s: %w", k, err)
		}
		if ok {
			// A keyframe that does not verify is passed over, as a cold
			// load passes it: the window then starts at index 0.
			if st, err := model.FromKeyframe(kf); err == nil {
				start, before = kf.Index+1, st
			}
		}
	}
	from, ops, err := place.Window(start, rev, func(from, to int64) ([]oplog.Operation, error) { return e.readRange(ctx, k, from, to) })
	if err != nil {
		return nil, err
	}
	st := &place.Stored{From: from, Ops: ops, Before: before}
	if from == 0 {
		st.Before = nil
		return st, nil
	}
	rctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
	defer cancel()
	if from != start {
		rb, err := e.cfg.Registry.StateAt(rctx, e.cfg.Store, k, head.DocumentType, from, storedPage)
		if err != nil {
			return nil, fmt.Errorf("rebuild %s at index %d: %w", k, from, err)
		}
		if rb.State.Revision != from {
			return nil, fmt.Errorf("rebuild %s at index %d: the stream has only %d operations", k, from, rb.State.Revision)
		}
		st.Before = rb.State
	}
	if len(ids) > 0 {
		slices.Sort(ids)
		if st.Held, err = held.HeldBefore(rctx, k, from, slices.Compact(ids)); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// readRange reads a stream's operations with indexes in [from, to), in
// pages.
func (e *Executor) readRange(ctx context.Context, k oplog.StreamKey, from, to int64) ([]oplog.Operation, error) {
	ops := make([]oplog.Operation, 0, to-from)
	for next := from; next < to; next = from + int64(len(ops)) {
		rctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
		got, err := e.cfg.Store.ReadStream(rctx, k, next, int(min(to-next, storedPage)))
		cancel()
		if err != nil {
			return nil, err
		}
		if len(got) == 0 {
			return nil, fmt.Errorf("stream %s ends at index %d, before index %d the head has", k, next, to)
		}
		ops = append(ops, got...)
	}
	return ops, nil
}
