// Package lifecycle is the start/stop bookkeeping doclog's long-running
// components share (the executor, the projector runner), in the shape of
// the HTTP servers': Start starts the component's goroutine and returns once
// it runs, Stop stops it and waits, bounded by its context. Stopping twice,
// or stopping a component never started, is harmless; starting twice, or
// after a stop, is an error, since a component's Kafka client does not
// outlive its first stop.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrStarted is Start's error for a component started before.
var ErrStarted = errors.New("already started")

// ErrStopped is Start's error for a component stopped before.
var ErrStopped = errors.New("already stopped")

type state int

const (
	created state = iota
	running
	stopped
)

// Lifecycle is embedded by value in a component; its zero value is a
// component not yet started.
type Lifecycle struct {
	mu     sync.Mutex
	state  state
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start calls start with the context the component runs under, which ends
// at Stop (it keeps ctx's values, not its cancellation: ctx bounds the start
// only), then runs the function start returned in a goroutine of its own.
// start runs while the lifecycle is locked, so a concurrent Stop waits for
// it; if it fails, nothing runs and the component may be started again.
// Start fails without calling start when ctx has ended, or when the
// component was started or stopped before.
func (l *Lifecycle) Start(ctx context.Context, start func(ctx context.Context) (run func() error, err error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case running:
		return ErrStarted
	case stopped:
		return ErrStopped
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run, err := start(runCtx)
	if err != nil {
		cancel()
		return err
	}
	l.state, l.cancel = running, cancel
	done := l.doneLocked()
	go func() {
		err := run()
		cancel()
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(done)
	}()
	return nil
}

// Stop ends the run's context and waits for the run to return, or for ctx
// to end: then it returns ctx's error and the run goes on stopping (a later
// Stop waits for it again). A component never started is marked stopped,
// and release, if not nil, frees what it holds; every Stop waits for that
// too. Stopping a stopped component waits for nothing more.
func (l *Lifecycle) Stop(ctx context.Context, release func()) error {
	l.mu.Lock()
	switch l.state {
	case created:
		l.state = stopped
		done := l.doneLocked()
		l.mu.Unlock()
		if release != nil {
			release()
		}
		close(done)
		return nil
	case running:
		l.state = stopped
		l.cancel()
	}
	done := l.doneLocked()
	l.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop: %w", context.Cause(ctx))
	}
}

// Done is closed once the component has stopped: its run returned, after a
// Stop or on its own, or a Stop came before any Start.
func (l *Lifecycle) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.doneLocked()
}

// Err is what the run returned, once Done is closed; nil before.
func (l *Lifecycle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *Lifecycle) doneLocked() chan struct{} {
	if l.done == nil {
		l.done = make(chan struct{})
	}
	return l.done
}
