package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of BatcherConfig.
const (
	DefaultBatcherMaxJobs     = 100
	DefaultBatcherMaxBytes    = 4 << 20
	DefaultBatcherMaxInFlight = 4
)

// ErrBatcherClosed is Batcher.Submit's error once Close was called.
var ErrBatcherClosed = errors.New("client: the batcher is closed")

// BatcherConfig tunes a Batcher. The zero value takes every default.
type BatcherConfig struct {
	// MaxJobs bounds the jobs of one request. Default 100. The server
	// refuses a batch of more than its own bound (1,000 by default) as a
	// whole.
	MaxJobs int
	// MaxBytes bounds the encoded jobs of one request; a job larger than
	// this goes alone. Default 4 MiB, half of the server's default bound
	// on a batch's body.
	MaxBytes int
	// MaxInFlight bounds the requests in flight at once. A job submitted
	// while all of them are out waits for the first to be answered, and
	// then leaves with every job that waited with it. Default 4.
	MaxInFlight int
}

// WithDefaults returns a copy with every unset field at its default.
func (c BatcherConfig) WithDefaults() BatcherConfig {
	if c.MaxJobs == 0 {
		c.MaxJobs = DefaultBatcherMaxJobs
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultBatcherMaxBytes
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultBatcherMaxInFlight
	}
	return c
}

// Validate reports the first setting that cannot work, in a sentence
// naming the field.
func (c BatcherConfig) Validate() error {
	switch {
	case c.MaxJobs < 1:
		return fmt.Errorf("batcher config: MaxJobs must be at least 1, got %d", c.MaxJobs)
	case c.MaxBytes < 1:
		return fmt.Errorf("batcher config: MaxBytes must be at least 1, got %d", c.MaxBytes)
	case c.MaxInFlight < 1:
		return fmt.Errorf("batcher config: MaxInFlight must be at least 1, got %d", c.MaxInFlight)
	}
	return nil
}

// Batcher submits mutate jobs from many goroutines through POST
// /v1/jobs:batch: the jobs submitted while its requests are in flight leave
// together in the next one. Each caller still submits one job and waits
// for its own acceptance, as with SubmitJob, but the server answers one
// request, and the broker one produce per partition, for each batch instead
// of each job. Nothing lingers: a job submitted while a request slot is
// free leaves at once, alone if it is alone, so batches grow with the load
// and cost no wait when it is light.
//
// A job's outcome is the one SubmitJob would have had: its acceptance as
// soon as its request is answered, a refusal for good at once, and a
// refusal worth retrying (429, 503) sent again under the same key, in a
// later request, within the client's MaxAttempts and backoff. A request
// that failed as a whole is retried as any request is, and its error is
// then every one of its jobs' error. Jobs submitted one after the other
// (each once the previous returned) run in that order, as with SubmitJob;
// jobs submitted concurrently have no order between them.
//
// A Batcher is safe for concurrent use. Close it when done.
type Batcher struct {
	c   *Client
	cfg BatcherConfig

	mu       sync.Mutex
	queue    []*batchCall
	inFlight int
	closed   bool
	// work counts the requests in flight and the jobs waiting out a
	// retry's delay; Close waits for it.
	work sync.WaitGroup
}

// batchCall is one Submit: its job, encoded, and where its outcome goes.
type batchCall struct {
	ctx      context.Context
	encoded  []byte
	key      string
	attempts int
	res      BatchResult
	done     chan struct{}
}

// NewBatcher returns a Batcher that submits through c.
func (c *Client) NewBatcher(cfg BatcherConfig) (*Batcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Batcher{c: c, cfg: cfg}, nil
}

// Submit submits j, in a batch with the jobs submitted around it, and
// returns once the broker acknowledged it (or it was refused); WaitJob
// follows it to its result. When ctx ends first, Submit returns ctx's
// error: a job not yet sent is then never sent, and one in a request is
// accepted or not, as the server decides (submit it again with the same
// key, WithIdempotencyKey, to know). A request is cancelled once every
// caller whose job it carries has given up.
func (b *Batcher) Submit(ctx context.Context, j Job, opts ...SubmitOption) (*Accepted, error) {
	var o submitOptions
	for _, opt := range opts {
		opt(&o)
	}
	encoded, key, err := encodeBatchJob(BatchJob{Job: j, IdempotencyKey: o.key})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	call := &batchCall{ctx: ctx, encoded: encoded, key: key, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrBatcherClosed
	}
	b.queue = append(b.queue, call)
	b.sendLocked()
	b.mu.Unlock()
	select {
	case <-call.done:
		return call.res.Accepted, call.res.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops taking jobs and returns once every job already submitted has
// its outcome: the queued ones are still sent, and retries still waited
// out.
func (b *Batcher) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.work.Wait()
}

// sendLocked sends the queue's jobs in as many requests as there are free
// slots, each up to MaxJobs and MaxBytes. Jobs whose caller gave up are
// dropped unsent.
func (b *Batcher) sendLocked() {
	for b.inFlight < b.cfg.MaxInFlight && len(b.queue) > 0 {
		var batch []*batchCall
		n, size := 0, 0
		for ; n < len(b.queue) && len(batch) < b.cfg.MaxJobs; n++ {
			call := b.queue[n]
			if call.ctx.Err() != nil {
				continue
			}
			if len(batch) > 0 && size+len(call.encoded) > b.cfg.MaxBytes {
				break
			}
			batch, size = append(batch, call), size+len(call.encoded)
		}
		clear(b.queue[:n]) // the backing array outlives the calls
		b.queue = b.queue[n:]
		if len(batch) == 0 {
			continue
		}
		b.inFlight++
		b.work.Add(1)
		go b.send(batch)
	}
}

// send makes one request of batch and settles each job: accepted and
// refused for good at once, refused worth retrying after its backoff.
func (b *Batcher) send(batch []*batchCall) {
	defer b.work.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := atomic.Int64{}
	live.Store(int64(len(batch)))
	for _, call := range batch {
		stop := context.AfterFunc(call.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	encoded := make([][]byte, len(batch))
	for i, call := range batch {
		encoded[i] = call.encoded
	}
	results, err := b.c.sendBatch(ctx, encoded, func(int) string { return "" })

	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	var retry []*batchCall
	var lastErr error
	for i, call := range batch {
		call.attempts++
		r := BatchResult{Err: err}
		if err == nil {
			r = results[i]
		}
		if e := r.retryable(); err == nil && e != nil && call.attempts < b.c.cfg.MaxAttempts && call.ctx.Err() == nil {
			retry, lastErr = append(retry, call), e
			continue
		}
		if r.Accepted != nil {
			r.Accepted.IdempotencyKey = call.key
		}
		call.res = r
		close(call.done)
	}
	if len(retry) > 0 {
		b.work.Add(1)
		time.AfterFunc(b.c.delayFor(lastErr, retry[0].attempts), func() {
			defer b.work.Done()
			b.mu.Lock()
			defer b.mu.Unlock()
			// Ahead of the jobs submitted since: they came later.
			b.queue = append(retry, b.queue...)
			b.sendLocked()
		})
	}
	b.sendLocked()
}
