package executor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/doclog/doclog/executor/reduce"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// The announcer: a settled job's records (a write-ready record built from
// the operations reduce built, or a dead letter) are kept on the job until
// publish produces them; the offsets move past a job only after that.

// publish produces the records announcing every settled job and waits for
// the acknowledgements (stage: produce), then forgets those jobs. A failed
// produce keeps them for the next try.
func (e *Executor) publish(ctx context.Context) error {
	var out []*kgo.Record
	for _, ps := range e.sortedParts() {
		for _, p := range ps.jobs {
			if !p.settled {
				continue
			}
			for _, r := range p.out {
				out = append(out, fresh(r))
			}
		}
	}
	if len(out) > 0 {
		// The client's record delivery timeout (ProduceTimeout) bounds the
		// produce; failing records from outside through a context while
		// their batch waits to be retried can wedge the partition's buffer.
		start := time.Now()
		err := e.cl.ProduceSync(ctx, out...).FirstErr()
		e.m.since("produce", start)
		if err != nil {
			return &produceError{n: len(out), err: err}
		}
	}
	for _, ps := range e.parts {
		ps.jobs = slices.DeleteFunc(ps.jobs, func(p *pending) bool { return p.settled })
	}
	return nil
}

// fresh copies an announcement record for one attempt: the client stamps a
// record when it is first produced and times its delivery from that stamp,
// so a record produced again would time out at once.
func fresh(r *kgo.Record) *kgo.Record {
	return &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers}
}

// announcement is a job's announcement produced without waiting
// (AsyncAnnounce): how many of its records the brokers have still to
// acknowledge, and the first failure among them.
type announcement struct {
	left atomic.Int32
	mu   sync.Mutex
	err  error
}

func (a *announcement) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
}

func (a *announcement) failure() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// publishAsync forgets the jobs whose announcements were acknowledged since
// the last call (reap), then produces the records announcing every job
// settled since, without waiting for them; the stage produce is the time
// from a call's produce to its last acknowledgement. A job whose produce
// failed is produced again on the next call, which the returned error (an
// outage) delays by its backoff, and the error is returned until that
// produce is acknowledged: as waiting does, the member stays unavailable,
// and takes no new work, until the brokers take its announcements again.
func (e *Executor) publishAsync() error {
	reaped := e.reap()
	start := time.Now()
	var wave atomic.Int32 // the records of this call still unacknowledged
	for _, ps := range e.sortedParts() {
		for _, p := range ps.jobs {
			if !p.settled || p.ann != nil {
				continue
			}
			a := &announcement{}
			p.ann = a
			if len(p.out) == 0 {
				continue // nothing to announce: reaped next time
			}
			a.left.Store(int32(len(p.out)))
			wave.Add(int32(len(p.out)))
			e.inFlight.Add(len(p.out))
			for _, r := range p.out {
				// No context but the client's delivery timeout
				// (ProduceTimeout), as publish has.
				e.cl.Produce(context.Background(), fresh(r), func(_ *kgo.Record, err error) {
					defer e.inFlight.Done()
					if err != nil {
						a.fail(err)
					}
					if wave.Add(-1) == 0 {
						e.m.since("produce", start)
					}
					if a.left.Add(-1) == 0 {
						// All acknowledged: the offsets may move past
						// the job without waiting for new records.
						e.wake()
					}
				})
			}
		}
	}
	if reaped != nil {
		return reaped
	}
	retrying := 0
	for _, ps := range e.parts {
		for _, p := range ps.jobs {
			if p.retried && p.ann != nil {
				retrying += len(p.out)
			}
		}
	}
	if retrying > 0 {
		return &produceError{n: retrying, err: fmt.Errorf("produced again after a failure, not acknowledged yet: %w", e.announceErr)}
	}
	return nil
}

// reap forgets the settled jobs whose announcements are all acknowledged,
// which lets the offsets move past them. One whose produce failed is kept,
// to be produced again, and reported.
func (e *Executor) reap() error {
	var (
		first  error
		failed int
	)
	for _, ps := range e.parts {
		ps.jobs = slices.DeleteFunc(ps.jobs, func(p *pending) bool {
			if !p.settled || p.ann == nil || p.ann.left.Load() > 0 {
				return false
			}
			if err := p.ann.failure(); err != nil {
				p.ann, p.retried = nil, true
				failed += len(p.out)
				if first == nil {
					first = err
				}
				return false
			}
			return true
		})
	}
	if first != nil {
		e.announceErr = first
		return &produceError{n: failed, err: first}
	}
	return nil
}

// awaitAnnouncements waits, at the stop, for the announcements in flight to
// be acknowledged or to fail, then reaps them.
func (e *Executor) awaitAnnouncements(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		e.inFlight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return e.reap()
	case <-ctx.Done():
		return fmt.Errorf("waiting for the announcements in flight: %w", ctx.Err())
	}
}

// reannounce rebuilds the announcement of a job that already has a result:
// a write-ready record from its stored ranges, or its dead letter. Nothing
// reduced it in this member, so its operations are read from the log.
func (e *Executor) reannounce(ctx context.Context, p *pending, jr oplog.JobResult, now time.Time) error {
	var ops []oplog.Operation
	if jr.Status == oplog.JobWriteReady {
		for _, r := range jr.Streams {
			rctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
			got, err := e.cfg.Store.ReadStream(rctx, r.Stream, r.FromIndex, int(r.ToIndex-r.FromIndex+1))
			cancel()
			if err != nil {
				return fmt.Errorf("read %s %d..%d: %w", r.Stream, r.FromIndex, r.ToIndex, err)
			}
			ops = append(ops, got...)
		}
	}
	e.log.Debug("job already has a result: announcing it again", zap.String("job_id", p.job.JobID),
		zap.String("document_id", p.job.DocumentID), zap.String("status", string(jr.Status)))
	e.m.jobs.WithLabelValues(string(jr.Status), "true").Inc()
	e.announce(p, jr, ops, now)
	return nil
}

// announce settles a job with the records that announce its result; ops
// are its operations (reduce.Stored, or read from the log).
func (e *Executor) announce(p *pending, jr oplog.JobResult, ops []oplog.Operation, now time.Time) {
	var (
		out *kgo.Record
		err error
	)
	switch jr.Status {
	case oplog.JobWriteReady:
		if len(jr.Streams) == 0 {
			// A load job whose operations were all stored already, or a
			// delete-branch job (a registry change only), wrote no stream:
			// there is nothing for a projector to apply.
			p.settled = true
			p.out = p.out[:0]
			return
		}
		out, err = e.writeReadyRecord(p, jr, ops, now)
		e.log.Debug("job committed", zap.String("job_id", p.job.JobID), zap.String("document_id", p.job.DocumentID))
	default:
		out, err = e.deadLetterRecord(p, jr, now)
	}
	p.settled = true
	if err != nil {
		e.log.Error("build announcement record", zap.String("job_id", p.job.JobID), zap.String("document_id", p.job.DocumentID), zap.Error(err))
		return
	}
	p.out = append(p.out[:0], out)
}

// writeReadyRecord builds the write-ready record of a committed job from its
// stored result and its operations.
func (e *Executor) writeReadyRecord(p *pending, jr oplog.JobResult, ops []oplog.Operation, now time.Time) (*kgo.Record, error) {
	wr, err := reduce.WriteReady(p.job, jr, ops, now)
	if err != nil {
		return nil, err
	}
	return record.NewWriteReadyRecord(e.cfg.Topics.WriteReady, wr, e.cfg.InlineOperationsBytes)
}

// deadLetterRecord builds the dead letter of a failed job, classified by the
// name of its last error.
func (e *Executor) deadLetterRecord(p *pending, jr oplog.JobResult, now time.Time) (*kgo.Record, error) {
	if p.undecodable != nil {
		e.m.deadLetters.WithLabelValues(string(p.undecodable.ErrorType)).Inc()
		return record.NewDeadLetterRecord(e.cfg.Topics.DeadLetters, p.undecodable)
	}
	last := oplog.ErrorInfo{Name: NameError, Message: "the job failed without a recorded error"}
	if n := len(jr.ErrorHistory); n > 0 {
		last = jr.ErrorHistory[n-1]
	}
	dl := &record.DeadLetter{
		Job:       p.job,
		Error:     last,
		ErrorType: reduce.FailureType(last),
		Attempts:  p.attempts + 1,
		Source:    record.SourceOf(p.rec),
		FailedAt:  now,
	}
	e.log.Info("job failed", zap.String("job_id", p.job.JobID), zap.String("document_id", p.job.DocumentID),
		zap.String("error_type", string(dl.ErrorType)), zap.String("error", last.Name+": "+last.Message))
	e.m.deadLetters.WithLabelValues(string(dl.ErrorType)).Inc()
	return record.NewDeadLetterRecord(e.cfg.Topics.DeadLetters, dl)
}
