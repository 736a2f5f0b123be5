package logtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

// rowKey names a row by what the log stores it under, its position and its
// identity, never by its (txid, ordinal): a request re-run after its batch
// raised lands under another transaction than the first attempt had.
func rowKey(op oplog.Operation) string {
	return fmt.Sprintf("%s/%s/%s/%d %s", op.DocumentID, op.Scope, op.Branch, op.Index, op.OpID)
}

// tailWatcher pages the tail without pause and records where each row came.
type tailWatcher struct {
	s      oplog.Store
	mu     sync.Mutex
	pos    map[string]int // row → its place in the tail, from 0
	last   oplog.Operation
	cursor oplog.Cursor
	errs   []string
}

func (w *tailWatcher) run(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		page, err := w.s.Tail(ctx, w.cursor, 1+rng.IntN(40))
		if err != nil {
			if ctx.Err() == nil {
				w.fail("tail after %q: %v", w.cursor, err)
			}
			return
		}
		w.mu.Lock()
		for _, op := range page.Operations {
			k := rowKey(op)
			if at, ok := w.pos[k]; ok {
				w.errs = append(w.errs, fmt.Sprintf("row %s handed out twice (at %d and %d), the second after %q", k, at, len(w.pos), w.cursor))
			}
			if len(w.pos) > 0 && !(op.TxID > w.last.TxID || op.TxID == w.last.TxID && op.Ordinal > w.last.Ordinal) {
				w.errs = append(w.errs, fmt.Sprintf("row %s at %d.%d came after %d.%d", k, op.TxID, op.Ordinal, w.last.TxID, w.last.Ordinal))
			}
			w.pos[k] = len(w.pos)
			w.last = op
		}
		w.cursor = page.Next
		w.mu.Unlock()
		if len(page.Operations) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

func (w *tailWatcher) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, fmt.Sprintf(format, args...))
}

func (w *tailWatcher) seen(k string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.pos[k]
	return ok
}

// missing lists the rows of want the tail has not handed out yet.
func (w *tailWatcher) missing(want map[string]oplog.Operation) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k := range want {
		if _, ok := w.pos[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// heldRound is one round of the held-writer scenario: rows whose
// transactions were open while later rows committed.
type heldRound struct {
	held, later []string
}

// testTailSkipsNothingUnderLoad holds the tail to its contract under
// concurrency: every committed row is handed out exactly once, in (txid,
// ordinal) order, however the writers' commits interleave. In each of
// thousands of rounds one to three transactions hold a row open while a
// later append commits, and commit in a shuffled order, so commits come out
// of transaction id order; meanwhile writers append batches of every size
// (some with two requests claiming one identity, which makes a batch's
// statement raise and its requests re-run in a new transaction) and a
// reader pages the tail with small, varying limits.
func testTailSkipsNothingUnderLoad(t *testing.T, h Harness) {
	s := h.NewStore(t)
	runCtx, stop := context.WithCancel(ctx(t))
	defer stop()
	w := &tailWatcher{s: s, pos: map[string]int{}}
	var (
		mu       sync.Mutex
		want     = map[string]oplog.Operation{}
		rounds   []heldRound
		wg       sync.WaitGroup
		writerWG sync.WaitGroup
	)
	record := func(ops []oplog.Operation) []string {
		mu.Lock()
		defer mu.Unlock()
		keys := make([]string, len(ops))
		for i, op := range ops {
			keys[i] = rowKey(op)
			want[keys[i]] = op
		}
		return keys
	}
	wg.Go(func() { w.run(runCtx, rand.New(rand.NewPCG(1, 1))) })
	writersDone := make(chan struct{})
	for n := range 2 {
		writerWG.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(n), 2))
			for {
				select {
				case <-writersDone:
					return
				default:
				}
				if err := appendMixedBatch(runCtx, s, rng, record); err != nil {
					w.fail("writer %d: %v", n, err)
					return
				}
				// Paced, so that the writers keep committing between the
				// rounds' commits rather than take the machine.
				time.Sleep(time.Duration(1+rng.IntN(3)) * time.Millisecond)
			}
		})
	}

	// Rounds run from several goroutines at once, so that commits also
	// interleave across rounds; each waits on round trips more than it
	// works, which on a busy machine is most of the test's time. Three
	// runners hold at most nine connections between them, and a backend
	// may pool as few as a dozen.
	const heldRounds, runners = 1200, 3
	var runnerWG sync.WaitGroup
	for n := range runners {
		runnerWG.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(n), 3))
			for round := range heldRounds / runners {
				r, err := heldWriterRound(runCtx, t, h, s, w, rng, record)
				if err != nil {
					w.fail("runner %d, round %d: %v", n, round, err)
					return
				}
				mu.Lock()
				rounds = append(rounds, r)
				mu.Unlock()
			}
		})
	}
	runnerWG.Wait()
	close(writersDone)
	writerWG.Wait()

	deadline := time.Now().Add(30 * time.Second)
	for len(w.missing(want)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()

	require.Empty(t, w.errs, "the tail broke its contract, or a writer failed")
	if miss := w.missing(want); len(miss) > 0 {
		var b strings.Builder
		for _, k := range miss[:min(len(miss), 20)] {
			op := want[k]
			stored, err := s.ReadStream(ctx(t), op.Stream(), op.Index, 1)
			require.NoError(t, err)
			fmt.Fprintf(&b, "\n  %s stored as %d.%d", k, stored[0].TxID, stored[0].Ordinal)
		}
		t.Fatalf("%d of %d committed rows never came out of the tail (its cursor is at %q):%s", len(miss), len(want), w.cursor, b.String())
	}
	for k := range w.pos {
		if _, ok := want[k]; !ok {
			t.Fatalf("the tail handed out %s, a row no append reported written", k)
		}
	}
	for i, r := range rounds {
		for _, hk := range r.held {
			for _, lk := range r.later {
				require.Less(t, w.pos[hk], w.pos[lk], "round %d: a row of an older transaction comes first", i)
			}
		}
	}
	require.GreaterOrEqual(t, len(want), heldRounds*2)
	t.Logf("%d held-writer rounds, %d rows, all handed out once and in order", heldRounds, len(want))
}

// heldWriterRound holds one to three rows open while a later append
// commits, checks that the tail does not hand out the later rows while any
// of them is open, and commits them in a shuffled order.
func heldWriterRound(ctx context.Context, t *testing.T, h Harness, s oplog.Store, w *tailWatcher, rng *rand.Rand,
	record func([]oplog.Operation) []string) (heldRound, error) {
	held := make([]oplog.Operation, 1+rng.IntN(3))
	commits := make([]func(), len(held))
	for i := range held {
		held[i] = ops(stream(oplog.ScopeGlobal), newJobID(), 0, 1)[0]
		commits[i] = h.HoldTransaction(t, s, held[i])
	}
	res, err := s.Append(ctx, []oplog.AppendRequest{request(stream(oplog.ScopeGlobal), 0, 1+rng.IntN(3))})
	if err != nil {
		return heldRound{}, fmt.Errorf("the later append: %w", err)
	}
	if res[0].Err != nil {
		return heldRound{}, fmt.Errorf("the later append: %w", res[0].Err)
	}
	r := heldRound{later: record(res[0].Operations)}
	rng.Shuffle(len(commits), func(i, j int) { commits[i], commits[j] = commits[j], commits[i] })
	for _, commit := range commits {
		for _, k := range r.later {
			if w.seen(k) {
				return r, fmt.Errorf("the tail handed out %s while an older transaction was open", k)
			}
		}
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		}
		commit()
	}
	r.held = record(held)
	return r, nil
}

// appendMixedBatch appends one batch of one to four requests of up to 8
// operations each, each request on a new stream; one batch in six
// has two requests claim one identity, so its statement raises and the
// store re-runs it request by request. It records every row reported
// written, and checks that a request reported failed wrote nothing.
func appendMixedBatch(ctx context.Context, s oplog.Store, rng *rand.Rand, record func([]oplog.Operation) []string) error {
	n := 1 + rng.IntN(4)
	batch := make([]oplog.AppendRequest, n)
	for i := range batch {
		batch[i] = request(stream(oplog.ScopeGlobal), 0, 1+rng.IntN(8))
	}
	clash := n > 1 && rng.IntN(6) == 0
	if clash {
		batch[n-1].Streams[0].Operations[0].OpID = batch[0].Streams[0].Operations[0].OpID
	}
	res, err := s.Append(ctx, batch)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("append: %w", err)
	}
	for i, r := range res {
		if r.Err == nil {
			record(r.Operations)
			continue
		}
		var dup *oplog.DuplicateOperation
		if !clash || i != n-1 || !errors.As(r.Err, &dup) {
			return fmt.Errorf("request %d of %d failed: %w", i, n, r.Err)
		}
		got, err := s.ReadStream(ctx, batch[i].Streams[0].Stream, 0, 0)
		if err != nil {
			return fmt.Errorf("reading a failed request's stream: %w", err)
		}
		if len(got) > 0 {
			return fmt.Errorf("a request reported %v wrote %d rows", r.Err, len(got))
		}
	}
	return nil
}
