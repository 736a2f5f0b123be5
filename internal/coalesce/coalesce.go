// Package coalesce serves many waiters with one periodic, batched lookup:
// each waiter names the keys it waits on, and one goroutine looks up every
// waited-for key once per round, in calls of at most Batch keys, and offers
// each waiter the results of its keys until it is satisfied. The lookups
// grow with the keys waited on, not with the waiters, so a thousand clients
// long-polling a few jobs cost a few queries per tick. The goroutine runs
// only while someone waits, so an idle poller holds no goroutine and no
// connection.
//
// Ingest waits for job results with it, the read store for the projections'
// progress on consistency tokens.
package coalesce

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed is what Wait returns once the poller is closed.
var ErrClosed = errors.New("the poller is closed")

// Lookup returns the results it has for keys. A key it leaves out has no
// result yet.
type Lookup[K comparable, V any] func(ctx context.Context, keys []K) (map[K]V, error)

// Config configures a Poller.
type Config struct {
	// Interval is the time between rounds while someone waits. Required.
	Interval time.Duration
	// Batch bounds the keys of one lookup; a round over more keys makes
	// several. Required.
	Batch int
	// Immediate runs the first round as soon as a waiter arrives on an idle
	// poller, for waiters that have not looked for themselves; otherwise it
	// runs an Interval later.
	Immediate bool
}

// Poller coalesces waiters into rounds of lookups. Create it with New, stop
// it with Close.
type Poller[K comparable, V any] struct {
	lookup Lookup[K, V]
	cfg    Config

	mu      sync.Mutex
	waiters map[*waiter[K, V]]struct{}
	keys    map[K]int // the waiters of each key
	running bool
	closed  bool
	stop    chan struct{}
	done    chan struct{} // closed when a running loop exits
	kick    chan struct{} // a round wanted now (Kick), buffered one deep
}

type waiter[K comparable, V any] struct {
	keys    []K
	settle  func(map[K]V, error) bool
	settled bool          // guarded by Poller.mu
	woken   chan struct{} // closed once settled
}

// New returns a poller over lookup. It panics on a config without an
// interval or a batch: that is a programming error.
func New[K comparable, V any](lookup Lookup[K, V], cfg Config) *Poller[K, V] {
	if cfg.Interval <= 0 || cfg.Batch < 1 {
		panic("coalesce: Interval and Batch must be positive")
	}
	return &Poller[K, V]{
		lookup: lookup, cfg: cfg,
		waiters: map[*waiter[K, V]]struct{}{}, keys: map[K]int{},
		stop: make(chan struct{}), kick: make(chan struct{}, 1),
	}
}

// Kick runs the next round now rather than at the end of the interval: the
// caller learnt that results may have arrived (a notification of the
// database's), and a waiter should not wait out the tick for them. Kicks
// arriving during a round make one round after it; with nobody waiting a
// kick does nothing. The interval stays the fallback, so a kick that never
// comes only costs its latency.
func (p *Poller[K, V]) Kick() {
	p.mu.Lock()
	running := p.running
	p.mu.Unlock()
	if !running {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Wait blocks until settle accepts what a round found for keys, ctx ends or
// the poller closes. After every round that looked all of keys up, settle
// is called with the results (a key without one is absent; the map is the
// round's, not to be kept) or, when a lookup of one of them failed, with nil
// and its error; it returns whether the wait is over. It runs on the
// poller's goroutine under its lock, so it must be quick and must not call
// the poller; once Wait has returned it is never called again. keys must
// not be empty: nothing would ever settle the wait.
//
// Wait returns nil once settle has accepted, else ErrClosed when the poller
// closed before or during the wait, else ctx's error.
func (p *Poller[K, V]) Wait(ctx context.Context, keys []K, settle func(results map[K]V, err error) bool) error {
	w := &waiter[K, V]{keys: keys, settle: settle, woken: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.waiters[w] = struct{}{}
	for _, k := range keys {
		p.keys[k]++
	}
	if !p.running {
		p.running = true
		p.done = make(chan struct{})
		go p.loop(p.done)
	}
	p.mu.Unlock()

	why := ErrClosed
	select {
	case <-w.woken:
		return nil
	case <-ctx.Done():
		why = ctx.Err()
	case <-p.stop:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.settled { // while we were giving up
		return nil
	}
	p.remove(w)
	return why
}

// remove drops a waiter; the caller holds mu.
func (p *Poller[K, V]) remove(w *waiter[K, V]) {
	delete(p.waiters, w)
	for _, k := range w.keys {
		if p.keys[k]--; p.keys[k] <= 0 {
			delete(p.keys, k)
		}
	}
}

func (p *Poller[K, V]) loop(done chan struct{}) {
	defer close(done)
	first := p.cfg.Interval
	if p.cfg.Immediate {
		first = 0
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-timer.C:
		case <-p.kick:
			timer.Stop()
		}
		if !p.round() {
			return
		}
		timer.Reset(p.cfg.Interval)
	}
}

// round looks up every waited-for key once and offers each waiter the
// results as soon as all its keys have been looked up, a waiter that arrived
// during the round included. It reports false, having marked the loop
// stopped, when nobody waits.
func (p *Poller[K, V]) round() bool {
	p.mu.Lock()
	if len(p.waiters) == 0 {
		p.running = false
		p.mu.Unlock()
		return false
	}
	keys := make([]K, 0, len(p.keys))
	call := make(map[K]int, len(p.keys)) // the lookup each key is in
	for k := range p.keys {
		call[k] = len(keys) / p.cfg.Batch
		keys = append(keys, k)
	}
	p.mu.Unlock()

	found := make(map[K]V, len(keys))
	failed := map[int]error{}
	offered := map[*waiter[K, V]]bool{}
	for i := 0; i*p.cfg.Batch < len(keys); i++ {
		part := keys[i*p.cfg.Batch : min((i+1)*p.cfg.Batch, len(keys))]
		res, err := p.lookupOnce(part)
		p.mu.Lock()
		if err != nil {
			failed[i] = err
		}
		for k, v := range res {
			found[k] = v
		}
		for w := range p.waiters {
			if offered[w] || !lookedUp(w, call, i) {
				continue
			}
			offered[w] = true
			if p.offer(w, call, found, failed) {
				w.settled = true
				p.remove(w)
				close(w.woken)
			}
		}
		p.mu.Unlock()
	}
	return true
}

// lookedUp reports whether every key of w was in one of the round's first
// done+1 lookups.
func lookedUp[K comparable, V any](w *waiter[K, V], call map[K]int, done int) bool {
	for _, k := range w.keys {
		if c, ok := call[k]; !ok || c > done {
			return false
		}
	}
	return true
}

// offer hands a waiter what the round found for its keys, or the error of
// a failed lookup of one of them; the caller holds mu.
func (p *Poller[K, V]) offer(w *waiter[K, V], call map[K]int, found map[K]V, failed map[int]error) bool {
	for _, k := range w.keys {
		if err, ok := failed[call[k]]; ok {
			return w.settle(nil, err)
		}
	}
	return w.settle(found, nil)
}

func (p *Poller[K, V]) lookupOnce(keys []K) (map[K]V, error) {
	ctx, cancel := context.WithTimeout(context.Background(), max(10*p.cfg.Interval, 5*time.Second))
	defer cancel()
	go func() {
		// Close cancels a lookup in flight so it never waits for a slow
		// database.
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return p.lookup(ctx, keys)
}

// Close wakes every waiter (Wait returns ErrClosed) and stops the loop,
// waiting for it to exit. It is safe to call more than once.
func (p *Poller[K, V]) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	running, done := p.running, p.done
	p.mu.Unlock()
	if running {
		<-done
	}
}
