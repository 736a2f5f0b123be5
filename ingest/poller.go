package ingest

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/coalesce"
	oplog "github.com/doclog/doclog/log"
)

// poller serves every ?wait= request: waiters register the job id they wait
// for, and one coalescing poller looks up all waited-for ids in one
// JobResults call per tick (several when more than PollBatch ids wait) and
// wakes the waiters of the jobs that have a result. Its first lookup runs at
// once: a waiter whose job already has a result should not wait a tick.
type poller struct {
	p *coalesce.Poller[string, oplog.JobResult]
}

func newPoller(reader ResultReader, interval time.Duration, batch int, logger *zap.Logger) *poller {
	lookup := func(ctx context.Context, ids []string) (map[string]oplog.JobResult, error) {
		results, err := reader.JobResults(ctx, ids)
		if err != nil {
			logger.Warn("look up results of waited-for jobs", zap.Int("jobs", len(ids)), zap.Error(err))
		}
		return results, err
	}
	return &poller{p: coalesce.New(lookup, coalesce.Config{Interval: interval, Batch: batch, Immediate: true})}
}

// wait blocks until the job has a result, ctx ends or the poller closes. ok
// is false without a result; err is then the error of the last lookup of
// the job, if it failed, so the caller does not report PENDING for a job it
// could not look up.
func (p *poller) wait(ctx context.Context, jobID string) (res oplog.JobResult, ok bool, err error) {
	var lastErr error
	werr := p.p.Wait(ctx, []string{jobID}, func(results map[string]oplog.JobResult, err error) bool {
		lastErr = err
		if err != nil {
			return false
		}
		r, found := results[jobID]
		if found {
			res = r
		}
		return found
	})
	if werr != nil {
		return oplog.JobResult{}, false, lastErr
	}
	return res, true, nil
}

// close wakes every waiter and stops the poller, waiting for it to exit.
func (p *poller) close() { p.p.Close() }
