package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/lifecycle"
)

// runUntilStop is a start function whose run returns ret once its context ends.
func runUntilStop(ran chan<- struct{}, ret error) func(context.Context) (func() error, error) {
	return func(ctx context.Context) (func() error, error) {
		return func() error {
			close(ran)
			<-ctx.Done()
			return ret
		}, nil
	}
}

func TestStartStop(t *testing.T) {
	var l lifecycle.Lifecycle
	ran := make(chan struct{})
	require.NoError(t, l.Start(context.Background(), runUntilStop(ran, nil)))
	<-ran
	select {
	case <-l.Done():
		t.Fatal("done before the stop")
	default:
	}
	require.NoError(t, l.Stop(context.Background(), nil))
	<-l.Done()
	require.NoError(t, l.Err())
	require.NoError(t, l.Stop(context.Background(), nil), "stopping twice is harmless")
}

func TestStartTwice(t *testing.T) {
	var l lifecycle.Lifecycle
	ran := make(chan struct{})
	require.NoError(t, l.Start(context.Background(), runUntilStop(ran, nil)))
	calls := 0
	err := l.Start(context.Background(), func(context.Context) (func() error, error) { calls++; return nil, nil })
	require.ErrorIs(t, err, lifecycle.ErrStarted)
	require.Zero(t, calls)
	require.NoError(t, l.Stop(context.Background(), nil))
}

func TestStartAfterStop(t *testing.T) {
	var l lifecycle.Lifecycle
	require.NoError(t, l.Start(context.Background(), runUntilStop(make(chan struct{}), nil)))
	require.NoError(t, l.Stop(context.Background(), nil))
	err := l.Start(context.Background(), runUntilStop(make(chan struct{}), nil))
	require.ErrorIs(t, err, lifecycle.ErrStopped)
}

func TestStopBeforeStart(t *testing.T) {
	var l lifecycle.Lifecycle
	released := 0
	require.NoError(t, l.Stop(context.Background(), func() { released++ }))
	require.NoError(t, l.Stop(context.Background(), func() { released++ }))
	require.Equal(t, 1, released, "release runs once, on the first stop")
	<-l.Done()
	require.NoError(t, l.Err())
	err := l.Start(context.Background(), runUntilStop(make(chan struct{}), nil))
	require.ErrorIs(t, err, lifecycle.ErrStopped)
}

func TestStopWaitsForRelease(t *testing.T) {
	var l lifecycle.Lifecycle
	releasing, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() { first <- l.Stop(context.Background(), func() { close(releasing); <-release }) }()
	<-releasing
	require.ErrorIs(t, l.Start(context.Background(), runUntilStop(make(chan struct{}), nil)), lifecycle.ErrStopped)
	second := make(chan error, 1)
	go func() { second <- l.Stop(context.Background(), nil) }()
	select {
	case <-second:
		t.Fatal("the second stop returned before the release ended")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-first)
	require.NoError(t, <-second)
}

func TestStopBoundedByContext(t *testing.T) {
	var l lifecycle.Lifecycle
	finish := make(chan struct{})
	require.NoError(t, l.Start(context.Background(), func(context.Context) (func() error, error) {
		// A run slow to stop: it ignores its context until told.
		return func() error { <-finish; return nil }, nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, l.Stop(ctx, nil), context.DeadlineExceeded)
	select {
	case <-l.Done():
		t.Fatal("done while the run goes on")
	default:
	}
	close(finish)
	require.NoError(t, l.Stop(context.Background(), nil), "a later stop waits for the run")
	<-l.Done()
}

func TestRunEndsOnItsOwn(t *testing.T) {
	var l lifecycle.Lifecycle
	boom := errors.New("boom")
	require.NoError(t, l.Start(context.Background(), func(context.Context) (func() error, error) {
		return func() error { return boom }, nil
	}))
	<-l.Done()
	require.ErrorIs(t, l.Err(), boom)
	require.ErrorIs(t, l.Start(context.Background(), runUntilStop(make(chan struct{}), nil)), lifecycle.ErrStarted)
	require.NoError(t, l.Stop(context.Background(), nil), "stopping a component that ended is harmless")
	require.ErrorIs(t, l.Err(), boom)
}

func TestFailedStartRunsNothing(t *testing.T) {
	var l lifecycle.Lifecycle
	boom := errors.New("boom")
	require.ErrorIs(t, l.Start(context.Background(), func(context.Context) (func() error, error) { return nil, boom }), boom)
	ran := make(chan struct{})
	require.NoError(t, l.Start(context.Background(), runUntilStop(ran, nil)), "a start that failed may be tried again")
	<-ran
	require.NoError(t, l.Stop(context.Background(), nil))
}

func TestStartWithEndedContext(t *testing.T) {
	var l lifecycle.Lifecycle
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := l.Start(ctx, func(context.Context) (func() error, error) { calls++; return nil, nil })
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, calls)
	released := false
	require.NoError(t, l.Stop(context.Background(), func() { released = true }))
	require.True(t, released, "a component that never started releases at its stop")
}

// The run's context outlives Start's: Start's context bounds the start only.
func TestRunContextIgnoresStartContext(t *testing.T) {
	var l lifecycle.Lifecycle
	ctx, cancel := context.WithCancel(context.Background())
	var runCtx context.Context
	require.NoError(t, l.Start(ctx, func(rc context.Context) (func() error, error) {
		runCtx = rc
		return func() error { <-rc.Done(); return nil }, nil
	}))
	cancel()
	require.NoError(t, runCtx.Err())
	require.NoError(t, l.Stop(context.Background(), nil))
	require.Error(t, runCtx.Err())
}
