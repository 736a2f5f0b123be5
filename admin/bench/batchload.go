package bench

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

// maxJobsPerRequest is ingest's default bound on the jobs of one
// POST /v1/jobs:batch.
const maxJobsPerRequest = 1000

// batchSubmitter sends several jobs in one request and returns each one's
// id or error, in order (httpSubmitter, through POST /v1/jobs:batch).
type batchSubmitter interface {
	mutateMany(ctx context.Context, jobs []mutation) ([]string, []error, error)
}

// mutation is one job of a batched submission.
type mutation struct {
	documentID string
	inputs     []json.RawMessage
}

// due is one job a group's worker is to submit: its document and the time
// it was due (closed loop: when its request was sent).
type due struct {
	doc int
	at  time.Time
}

// startBatched starts the load of a run with JobsPerRequest above one: the
// documents are dealt into groups of that many, each with one worker
// submitting the group's jobs in requests of up to that many jobs. In the
// closed loop a request carries the next job of every document of the
// group still submitting; in the open loop, the jobs due by the time the
// worker is free, in the order they fell due. A document's jobs stay in
// order either way.
func (r *runner) startBatched(ctx context.Context, wg *sync.WaitGroup, submitted *atomic.Int64, start, end time.Time) {
	per := r.cfg.JobsPerRequest
	var groups [][]int
	for d := range r.docs {
		if d%per == 0 {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], d)
	}
	next := make([]int, len(r.docs)) // each document's next job number
	if r.cfg.Rate == 0 {
		for _, g := range groups {
			wg.Go(func() {
				for ctx.Err() == nil {
					var batch []due
					now := time.Now()
					for _, d := range g {
						if limit := r.cfg.jobsOf(d); limit < 0 && now.Before(end) || next[d] < limit {
							batch = append(batch, due{doc: d, at: now})
						}
					}
					if len(batch) == 0 {
						return
					}
					r.submitMany(ctx, batch, next)
					submitted.Add(int64(len(batch)))
				}
			})
		}
		return
	}
	// Open loop: job i is due at start + i×interval and goes to document
	// i mod D, queued to its group's worker.
	interval := time.Duration(float64(time.Second) * float64(r.cfg.opsPerJob()) / r.cfg.Rate)
	queues := make([]chan due, len(groups))
	for q := range queues {
		queues[q] = make(chan due, 4096)
		wg.Go(func() {
			for first := range queues[q] {
				batch := []due{first}
			more:
				for len(batch) < per {
					select {
					case j, ok := <-queues[q]:
						if !ok {
							break more
						}
						batch = append(batch, j)
					default:
						break more
					}
				}
				r.submitMany(ctx, batch, next)
				submitted.Add(int64(len(batch)))
			}
		})
	}
	wg.Go(func() {
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		r.schedule(ctx, start, end, interval, func(d int, at time.Time) { queues[d/per] <- due{doc: d, at: at} })
	})
}

// submitMany sends the jobs in one request and records each acknowledged
// one, as submit does for one job. next numbers each document's jobs; only
// the document's group worker touches its entry.
func (r *runner) submitMany(ctx context.Context, batch []due, next []int) {
	muts := make([]mutation, len(batch))
	for i, j := range batch {
		muts[i] = mutation{documentID: r.docs[j.doc], inputs: r.inputs(next[j.doc])}
		next[j.doc]++
	}
	ids, errs, err := r.sub.(batchSubmitter).mutateMany(ctx, muts)
	for r.waitedOut(ctx, err) {
		if r.cfg.Rate == 0 {
			for i := range batch {
				batch[i].at = time.Now()
			}
		}
		ids, errs, err = r.sub.(batchSubmitter).mutateMany(ctx, muts)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.fails.Add(int64(len(batch)))
			r.lastErr.Store(err.Error())
			_ = sleep(ctx, 50*time.Millisecond) // do not spin on a refusing API
		}
		return
	}
	for i, j := range batch {
		if errs[i] != nil {
			r.fails.Add(1)
			r.lastErr.Store(errs[i].Error())
			continue
		}
		r.record(ids[i], j.doc, len(muts[i].inputs), j.at)
	}
}
