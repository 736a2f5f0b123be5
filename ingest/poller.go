package ingest

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	oplog "github.com/doclog/doclog/log"
)

// poller serves every ?wait= request: waiters register the job id they wait
// for, and one goroutine looks up all waited-for ids in one JobResults call
// per tick (several when more than PollBatch ids wait) and wakes the waiters
// of the jobs that have a result. The goroutine runs only while someone
// waits, so an idle handler holds no goroutine and no connection.
type poller struct {
	reader   ResultReader
	interval time.Duration
	batch    int
	logger   *zap.Logger

	mu      sync.Mutex
	waiters map[string][]chan oplog.JobResult
	running bool
	closed  bool
	lastErr error // of the last lookup; nil once one succeeds
	stop    chan struct{}
	done    chan struct{} // closed when a running loop exits
}

func newPoller(reader ResultReader, interval time.Duration, batch int, logger *zap.Logger) *poller {
	return &poller{
		reader: reader, interval: interval, batch: batch, logger: logger,
		waiters: map[string][]chan oplog.JobResult{},
		stop:    make(chan struct{}),
	}
}

// wait blocks until the job has a result, ctx ends or the poller closes. ok
// is false without a result; err is then the last lookup's error, if the
// last lookup failed, so the caller does not report PENDING for a job it
// could not look up.
func (p *poller) wait(ctx context.Context, jobID string) (res oplog.JobResult, ok bool, err error) {
	ch := make(chan oplog.JobResult, 1)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return oplog.JobResult{}, false, nil
	}
	p.waiters[jobID] = append(p.waiters[jobID], ch)
	if !p.running {
		p.running = true
		p.done = make(chan struct{})
		go p.loop(p.done)
	}
	p.mu.Unlock()

	select {
	case res := <-ch:
		return res, true, nil
	case <-ctx.Done():
	case <-p.stop:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remove(jobID, ch)
	select {
	case res := <-ch: // delivered while we were giving up
		return res, true, nil
	default:
	}
	return oplog.JobResult{}, false, p.lastErr
}

// remove drops one waiter; the caller holds mu.
func (p *poller) remove(jobID string, ch chan oplog.JobResult) {
	ws := p.waiters[jobID]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(p.waiters, jobID)
	} else {
		p.waiters[jobID] = ws
	}
}

func (p *poller) loop(done chan struct{}) {
	defer close(done)
	// The first lookup runs at once: a waiter whose job already has a
	// result should not wait a tick for it.
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-timer.C:
		}
		p.mu.Lock()
		if len(p.waiters) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		ids := make([]string, 0, len(p.waiters))
		for id := range p.waiters {
			ids = append(ids, id)
		}
		p.mu.Unlock()

		for start := 0; start < len(ids); start += p.batch {
			p.lookup(ids[start:min(start+p.batch, len(ids))])
		}
		timer.Reset(p.interval)
	}
}

func (p *poller) lookup(ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), max(p.interval*10, 5*time.Second))
	defer cancel()
	go func() {
		// Close cancels a lookup in flight so Stop does not wait for a
		// slow database.
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	results, err := p.reader.JobResults(ctx, ids)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = err
	if err != nil {
		p.logger.Warn("look up results of waited-for jobs", zap.Int("jobs", len(ids)), zap.Error(err))
		return
	}
	for id, res := range results {
		for _, ch := range p.waiters[id] {
			ch <- res // buffered, one result per waiter
		}
		delete(p.waiters, id)
	}
}

// close wakes every waiter and stops the loop, waiting for it to exit.
func (p *poller) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	done := p.done
	running := p.running
	p.mu.Unlock()
	if running {
		<-done
	}
}
