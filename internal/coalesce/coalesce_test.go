package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/doclog/doclog/internal/coalesce"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// table is a lookup over a map that tests fill in, counting its calls.
type table struct {
	mu     sync.Mutex
	values map[string]int
	err    error
	calls  atomic.Int64
	keys   atomic.Int64
	most   atomic.Int64 // the most keys of one call
}

func newTable() *table { return &table{values: map[string]int{}} }

func (tb *table) set(k string, v int) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.values[k] = v
}

func (tb *table) fail(err error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.err = err
}

func (tb *table) lookup(_ context.Context, keys []string) (map[string]int, error) {
	tb.calls.Add(1)
	tb.keys.Add(int64(len(keys)))
	for {
		most := tb.most.Load()
		if int64(len(keys)) <= most || tb.most.CompareAndSwap(most, int64(len(keys))) {
			break
		}
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.err != nil {
		return nil, tb.err
	}
	out := map[string]int{}
	for _, k := range keys {
		if v, ok := tb.values[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// waitFor waits for one key's value.
func waitFor(ctx context.Context, p *coalesce.Poller[string, int], key string) (int, error, error) {
	var got int
	var lastErr error
	err := p.Wait(ctx, []string{key}, func(res map[string]int, err error) bool {
		lastErr = err
		v, ok := res[key]
		got = v
		return ok
	})
	return got, lastErr, err
}

// Many waiters on a few keys are served by one lookup per round, each key
// asked for once, and all woken once the values exist.
func TestOneLookupServesManyWaiters(t *testing.T) {
	t.Parallel()
	tb := newTable()
	const interval = 20 * time.Millisecond
	p := coalesce.New(tb.lookup, coalesce.Config{Interval: interval, Batch: 100, Immediate: true})
	defer p.Close()

	keys := []string{"a", "b", "c"}
	const perKey = 50
	type answer struct {
		key string
		v   int
		err error
	}
	answers := make(chan answer, perKey*len(keys))
	start := time.Now()
	for _, k := range keys {
		for range perKey {
			go func() {
				v, _, err := waitFor(context.Background(), p, k)
				answers <- answer{k, v, err}
			}()
		}
	}
	require.Eventually(t, func() bool { return tb.calls.Load() >= 5 }, 10*time.Second, time.Millisecond)
	require.Empty(t, answers, "nobody is woken before the values exist")
	for i, k := range keys {
		tb.set(k, i+1)
	}
	for range perKey * len(keys) {
		select {
		case a := <-answers:
			require.NoError(t, a.err)
			require.Equal(t, map[string]int{"a": 1, "b": 2, "c": 3}[a.key], a.v)
		case <-time.After(10 * time.Second):
			t.Fatal("waiters were not woken after the values were set")
		}
	}
	calls := tb.calls.Load()
	require.LessOrEqual(t, calls, int64(time.Since(start)/interval)+2, "one lookup per round")
	require.LessOrEqual(t, tb.keys.Load(), calls*int64(len(keys)), "each key once per lookup")
}

// Immediate runs the first round at once; otherwise it comes an interval
// after the first waiter.
func TestFirstRound(t *testing.T) {
	t.Parallel()
	for _, immediate := range []bool{true, false} {
		tb := newTable()
		tb.set("k", 7)
		p := coalesce.New(tb.lookup, coalesce.Config{Interval: 300 * time.Millisecond, Batch: 10, Immediate: immediate})
		start := time.Now()
		v, _, err := waitFor(context.Background(), p, "k")
		took := time.Since(start)
		p.Close()
		require.NoError(t, err)
		require.Equal(t, 7, v)
		if immediate {
			require.Less(t, took, 250*time.Millisecond)
		} else {
			require.GreaterOrEqual(t, took, 300*time.Millisecond)
		}
	}
}

// A kick runs a round at once, so a waiter whose value arrived is woken
// without waiting out an interval of an hour; with nobody waiting a kick
// looks nothing up.
func TestKick(t *testing.T) {
	t.Parallel()
	tb := newTable()
	p := coalesce.New(tb.lookup, coalesce.Config{Interval: time.Hour, Batch: 10, Immediate: true})
	defer p.Close()
	p.Kick()
	require.Zero(t, tb.calls.Load(), "a kick with nobody waiting looks nothing up")

	done := make(chan int, 1)
	go func() {
		v, _, err := waitFor(context.Background(), p, "k")
		if err == nil {
			done <- v
		}
	}()
	require.Eventually(t, func() bool { return tb.calls.Load() == 1 }, 10*time.Second, time.Millisecond, "the immediate first round")
	tb.set("k", 9)
	require.Never(t, func() bool { return len(done) > 0 }, 100*time.Millisecond, 10*time.Millisecond, "without a kick the value waits for the hour's round")
	p.Kick()
	select {
	case v := <-done:
		require.Equal(t, 9, v)
	case <-time.After(10 * time.Second):
		t.Fatal("a kick did not run a round")
	}
	require.Equal(t, int64(2), tb.calls.Load(), "one round for the kick")
}

// A wait whose context ends returns its error, and the poller stops looking
// once nobody waits.
func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	tb := newTable()
	p := coalesce.New(tb.lookup, coalesce.Config{Interval: 10 * time.Millisecond, Batch: 10, Immediate: true})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, lastErr, err := waitFor(ctx, p, "never")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, lastErr)
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)

	time.Sleep(50 * time.Millisecond) // let the round after the timeout end
	calls := tb.calls.Load()
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, calls, tb.calls.Load(), "no lookups while nobody waits")

	// A new waiter starts the poller again.
	tb.set("later", 1)
	v, _, err := waitFor(context.Background(), p, "later")
	require.NoError(t, err)
	require.Equal(t, 1, v)
}

// Close wakes every waiter with ErrClosed, cancels a lookup in flight, and
// refuses later waits.
func TestClose(t *testing.T) {
	t.Parallel()
	inFlight := make(chan struct{})
	var once sync.Once
	slow := func(ctx context.Context, keys []string) (map[string]int, error) {
		once.Do(func() { close(inFlight) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p := coalesce.New(slow, coalesce.Config{Interval: 10 * time.Millisecond, Batch: 10, Immediate: true})
	errs := make(chan error, 10)
	for i := range 10 {
		go func() {
			_, _, err := waitFor(context.Background(), p, fmt.Sprint("k", i%3))
			errs <- err
		}()
	}
	<-inFlight
	start := time.Now()
	p.Close()
	require.Less(t, time.Since(start), 2*time.Second, "Close does not wait out a slow lookup")
	for range 10 {
		require.ErrorIs(t, <-errs, coalesce.ErrClosed)
	}
	_, _, err := waitFor(context.Background(), p, "k0")
	require.ErrorIs(t, err, coalesce.ErrClosed)
	p.Close() // again: nothing happens
}

// Batch bounds the keys of one lookup: more keys take several per round.
func TestBatch(t *testing.T) {
	t.Parallel()
	tb := newTable()
	p := coalesce.New(tb.lookup, coalesce.Config{Interval: 50 * time.Millisecond, Batch: 2})
	defer p.Close()
	var wg sync.WaitGroup
	for i := range 5 {
		k := fmt.Sprint("k", i)
		tb.set(k, i)
		wg.Go(func() {
			if v, _, err := waitFor(context.Background(), p, k); err != nil || v != i {
				t.Errorf("%s: got %d, %v; want %d", k, v, err, i)
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, tb.most.Load(), int64(2), "no lookup asks for more than Batch keys")
	require.GreaterOrEqual(t, tb.calls.Load(), int64(3), "five keys take three lookups")
}

// A waiter over several keys is offered the results once all its keys were
// looked up in the round, whichever lookups they fell in.
func TestWaiterOverManyKeys(t *testing.T) {
	t.Parallel()
	tb := newTable()
	p := coalesce.New(tb.lookup, coalesce.Config{Interval: 10 * time.Millisecond, Batch: 3, Immediate: true})
	defer p.Close()
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		tb.set(keys[i], i)
	}
	var seen map[string]int
	err := p.Wait(context.Background(), keys, func(res map[string]int, err error) bool {
		if err != nil {
			t.Errorf("lookup failed: %v", err)
		}
		for _, k := range keys {
			if _, ok := res[k]; !ok {
				t.Errorf("offered before %s was looked up", k)
			}
		}
		seen = map[string]int{}
		for _, k := range keys {
			seen[k] = res[k]
		}
		return true
	})
	require.NoError(t, err)
	require.Len(t, seen, 10)
	require.Equal(t, 9, seen["k9"])
	require.Equal(t, int64(4), tb.calls.Load(), "ten keys in lookups of three: one round")
}

// A failed lookup is offered as its error; the waiter goes on waiting and is
// served once lookups succeed again.
func TestLookupError(t *testing.T) {
	t.Parallel()
	tb := newTable()
	refused := errors.New("connection refused")
	tb.fail(refused)
	p := coalesce.New(tb.lookup, coalesce.Config{Interval: 10 * time.Millisecond, Batch: 10, Immediate: true})
	defer p.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, lastErr, err := waitFor(ctx, p, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, lastErr, refused, "the waiter saw why it could not be served")

	done := make(chan error, 1)
	var got int
	go func() {
		v, _, err := waitFor(context.Background(), p, "k")
		got = v
		done <- err
	}()
	require.Eventually(t, func() bool { return tb.calls.Load() >= 15 }, 10*time.Second, time.Millisecond)
	tb.set("k", 5)
	tb.fail(nil)
	select {
	case err := <-done:
		require.NoError(t, err)
		require.Equal(t, 5, got)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not served once lookups succeeded")
	}
}

func TestConfigMustBePositive(t *testing.T) {
	t.Parallel()
	tb := newTable()
	require.Panics(t, func() { coalesce.New(tb.lookup, coalesce.Config{Batch: 1}) })
	require.Panics(t, func() { coalesce.New(tb.lookup, coalesce.Config{Interval: time.Second}) })
}
