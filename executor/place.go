package executor

import (
	"context"
	"fmt"

	oplog "github.com/doclog/doclog/log"
)

// storedPage is how many operations loadStored reads per round trip.
const storedPage = 1000

// loadStored reads, for every job placed by timestamp (a load job, or a job
// of a model that asks for it), the whole of each stream it places in, from
// index 0 up to the head loaded (stage: load). A placement may supersede
// stored operations and re-derive the states after them, which the head
// alone cannot give. A document whose read fails joins loadErr; the first
// unavailable error is returned for the batch.
func (e *Executor) loadStored(ctx context.Context, docs []*docWork, loadErr map[*docWork]error) error {
	var unavailable error
	for _, dw := range docs {
		if loadErr[dw] != nil {
			continue
		}
		for _, p := range dw.jobs {
			if p.fail != nil {
				continue
			}
			for _, k := range e.reducer.NeedsStored(dw.id, p.job) {
				if _, ok := dw.stored[k]; ok {
					continue
				}
				head := dw.heads[k]
				if head == nil {
					continue // reduce fails the job: its scope was not loaded
				}
				ops, err := e.readStream(ctx, k, head.Revision)
				if err != nil {
					if isUnavailable(err) && unavailable == nil {
						unavailable = err
					}
					loadErr[dw] = fmt.Errorf("load the operations of %s: %w", k, err)
					break
				}
				if dw.stored == nil {
					dw.stored = map[oplog.StreamKey][]oplog.Operation{}
				}
				dw.stored[k] = ops
			}
			if loadErr[dw] != nil {
				break
			}
		}
	}
	return unavailable
}

// readStream reads a stream's first revision operations, in pages.
func (e *Executor) readStream(ctx context.Context, k oplog.StreamKey, revision int64) ([]oplog.Operation, error) {
	ops := make([]oplog.Operation, 0, revision)
	for int64(len(ops)) < revision {
		rctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
		got, err := e.cfg.Store.ReadStream(rctx, k, int64(len(ops)), int(min(revision-int64(len(ops)), storedPage)))
		cancel()
		if err != nil {
			return nil, err
		}
		if len(got) == 0 {
			return nil, fmt.Errorf("stream %s ends at index %d, before the head's revision %d", k, len(ops), revision)
		}
		ops = append(ops, got...)
	}
	return ops, nil
}
