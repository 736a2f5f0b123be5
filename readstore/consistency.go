package readstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/coalesce"
	oplog "github.com/doclog/doclog/log"
)

// A client sends the consistency token of a job (oplog.EncodeToken) in the
// TokenHeader header or the TokenParam query parameter, not both unless
// equal.
const (
	TokenHeader = "X-Consistency-Token"
	TokenParam  = "consistencyToken"
)

// tokenForm ends the message of an invalid token.
const tokenForm = "a consistency token is the opaque string a job's status returns in consistencyToken (GET /v1/jobs/{id} on the ingest API, or doclogctl jobs get); copy it as is"

// Behind is a token coordinate its source has not reached: Applied is the
// last index the source had applied to the stream when it was last looked
// up (-1 for none).
type Behind struct {
	oplog.Coordinate
	Applied int64
}

// ConsistencyTimeoutError reports a consistency-token wait that ended
// before the source reached every coordinate (the API answers 504).
type ConsistencyTimeoutError struct {
	Source Source
	Wait   time.Duration
	Behind []Behind
	// LastErr is the last lookup's error, when the lookups were failing.
	LastErr error
}

func (e *ConsistencyTimeoutError) Error() string {
	if e.LastErr != nil {
		return fmt.Sprintf("%s; the last lookup failed: %v", e.behind(), e.LastErr)
	}
	return e.behind()
}

// Unwrap returns the last lookup's error.
func (e *ConsistencyTimeoutError) Unwrap() error { return e.LastErr }

// behind is Error without the last lookup's error, whose driver text is for
// the log only: what the API tells the client.
func (e *ConsistencyTimeoutError) behind() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s did not reach the consistency token within %s:", e.Source, e.Wait)
	for i, c := range e.Behind {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s index %d (applied %d)", c.Stream(), c.Index, c.Applied)
	}
	if e.LastErr != nil {
		b.WriteString("; the last lookups failed")
	}
	return b.String()
}

// QuarantinedError reports a token coordinate on a stream the projection
// has quarantined before reaching it: it cannot be reached until the
// quarantine is lifted (the API answers 409).
type QuarantinedError struct {
	Source     Source
	Coordinate oplog.Coordinate
	Applied    int64
	Quarantine Quarantine
}

func (e *QuarantinedError) Error() string {
	k := e.Coordinate.Stream()
	return fmt.Sprintf("%s quarantined stream %s at index %d (%s: %s), so it cannot reach index %d of the consistency token (applied %d); "+
		"once the cause is fixed an operator lifts it with doclogctl docs quarantine lift %s --projector %s --scope %s --branch %s",
		e.Source, k, e.Quarantine.Index, e.Quarantine.ErrorName, e.Quarantine.Reason, e.Coordinate.Index, e.Applied,
		k.DocumentID, e.Source, k.Scope, k.Branch)
}

// closingError is returned to waiters when the handler closes.
type closingError struct{}

func (closingError) Error() string { return "the read store is shutting down" }

// progressFunc looks up how far a source has applied streams.
type progressFunc func(ctx context.Context, source Source, streams []oplog.StreamKey) (map[oplog.StreamKey]StreamProgress, error)

// evaluate compares coordinates with a source's progress: nil, nil when
// every one is reached; a *QuarantinedError when one is behind on a
// quarantined stream; else the coordinates behind.
func evaluate(source Source, coords []oplog.Coordinate, prog map[oplog.StreamKey]StreamProgress) ([]Behind, error) {
	var behind []Behind
	for _, c := range coords {
		p, ok := prog[c.Stream()]
		if !ok {
			p = StreamProgress{Applied: -1}
		}
		if p.Applied >= c.Index {
			continue
		}
		if p.Quarantine != nil {
			return nil, &QuarantinedError{Source: source, Coordinate: c, Applied: p.Applied, Quarantine: *p.Quarantine}
		}
		behind = append(behind, Behind{Coordinate: c, Applied: p.Applied})
	}
	return behind, nil
}

// followed returns the token's coordinates the source keeps, without
// duplicates (the highest index per stream).
func followed(source Source, t oplog.ConsistencyToken) []oplog.Coordinate {
	at := map[oplog.StreamKey]int{}
	var out []oplog.Coordinate
	for _, c := range t.Coordinates {
		if !source.Follows(c.Scope) {
			continue
		}
		if i, ok := at[c.Stream()]; ok {
			out[i].Index = max(out[i].Index, c.Index)
			continue
		}
		at[c.Stream()] = len(out)
		out = append(out, c)
	}
	return out
}

func streamsOf(coords []oplog.Coordinate) []oplog.StreamKey {
	out := make([]oplog.StreamKey, len(coords))
	for i, c := range coords {
		out[i] = c.Stream()
	}
	return out
}

// waiter serves every consistency-token wait of a handler. A request first
// checks its token with one lookup of its own (most tokens are reached by
// the time a client reads); only a token still behind waits here, on the
// coalescing poller of its source, which looks up every waited-for stream
// of the source in one query per tick (several when more than batch streams
// wait) and wakes the requests whose tokens are reached or quarantined.
type waiter struct {
	progress progressFunc
	interval time.Duration
	batch    int
	logger   *zap.Logger
	m        *metrics

	// notifier, when the store has one, is followed from the first wait
	// to close: each notification kicks its source's poller.
	notifier ProgressNotifier

	mu        sync.Mutex
	pollers   map[Source]*coalesce.Poller[oplog.StreamKey, StreamProgress]
	closed    bool
	stopWatch context.CancelFunc // nil until the watch starts
	watched   chan struct{}      // closed once the watch has returned
}

func newWaiter(progress progressFunc, interval time.Duration, batch int, logger *zap.Logger, m *metrics) *waiter {
	return &waiter{
		progress: progress, interval: interval, batch: batch, logger: logger, m: m,
		pollers: map[Source]*coalesce.Poller[oplog.StreamKey, StreamProgress]{},
	}
}

// kick runs the source's next lookup now, if anyone waits on it: the
// source has moved.
func (w *waiter) kick(source Source) {
	w.mu.Lock()
	p := w.pollers[source]
	w.mu.Unlock()
	if p != nil {
		p.Kick()
	}
}

// poller returns the source's poller, nil once the waiter is closed.
func (w *waiter) poller(source Source) *coalesce.Poller[oplog.StreamKey, StreamProgress] {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	p := w.pollers[source]
	if p == nil {
		lookup := func(ctx context.Context, streams []oplog.StreamKey) (map[oplog.StreamKey]StreamProgress, error) {
			w.m.lookups.WithLabelValues(string(source)).Inc()
			prog, err := w.progress(ctx, source, streams)
			if err != nil {
				w.logger.Warn("look up the progress of waited-for streams", zap.String("source", string(source)), zap.Error(err))
			}
			return prog, err
		}
		// The first lookup waits a tick: the request has just looked.
		p = coalesce.New(lookup, coalesce.Config{Interval: w.interval, Batch: w.batch})
		w.pollers[source] = p
		w.startWatch()
	}
	return p
}

// startWatch follows the notifier, once; the caller holds mu. It starts
// with the first wait, so a handler that never waits holds no connection
// for it.
func (w *waiter) startWatch() {
	if w.notifier == nil || w.stopWatch != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stopWatch, w.watched = cancel, make(chan struct{})
	go func() {
		defer close(w.watched)
		progressed := func(source Source) {
			w.m.notified.WithLabelValues(string(source)).Inc()
			w.kick(source)
		}
		w.notifier.WatchProgress(ctx, progressed, func(err error) {
			w.logger.Info("watching the projections' progress failed: consistency-token waits poll meanwhile",
				zap.Duration("poll_interval", w.interval), zap.Error(err))
		})
	}()
}

// await returns nil once source has applied every coordinate of the token
// it follows, *QuarantinedError when one cannot be reached,
// *ConsistencyTimeoutError when wait passes first, or ctx's error.
func (w *waiter) await(ctx context.Context, source Source, token oplog.ConsistencyToken, wait time.Duration) error {
	start := time.Now()
	queued, err := w.awaitToken(ctx, source, token, wait)
	var (
		timeout *ConsistencyTimeoutError
		quar    *QuarantinedError
	)
	outcome := outcomeError
	switch {
	case err == nil && !queued:
		outcome = outcomeAtOnce
	case err == nil:
		outcome = outcomeReached
	case errors.As(err, &timeout):
		outcome = outcomeTimeout
	case errors.As(err, &quar):
		outcome = outcomeQuarantined
	case errors.As(err, new(closingError)):
		outcome = outcomeClosed
	}
	w.m.waits.WithLabelValues(string(source), outcome).Inc()
	if queued {
		w.m.waitSeconds.WithLabelValues(string(source)).Observe(time.Since(start).Seconds())
	}
	return err
}

// awaitToken is await; queued reports whether the request waited on the
// shared poller.
func (w *waiter) awaitToken(ctx context.Context, source Source, token oplog.ConsistencyToken, wait time.Duration) (queued bool, _ error) {
	coords := followed(source, token)
	if len(coords) == 0 {
		return false, nil
	}
	prog, err := w.progress(ctx, source, streamsOf(coords))
	if err != nil {
		return false, fmt.Errorf("check the consistency token on %s: %w", source, err)
	}
	behind, err := evaluate(source, coords, prog)
	if err != nil || len(behind) == 0 {
		return false, err
	}
	if wait <= 0 {
		return false, &ConsistencyTimeoutError{Source: source, Wait: wait, Behind: behind}
	}
	p := w.poller(source)
	if p == nil {
		return false, closingError{}
	}
	w.m.waiting.Inc()
	defer w.m.waiting.Dec()

	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var settled, lastErr error
	werr := p.Wait(wctx, streamsOf(coords), func(prog map[oplog.StreamKey]StreamProgress, err error) bool {
		lastErr = err
		if err != nil {
			return false
		}
		b, qerr := evaluate(source, coords, prog)
		if qerr == nil && len(b) > 0 {
			behind = b
			return false
		}
		settled = qerr
		return true
	})
	switch {
	case werr == nil:
		return true, settled
	case errors.Is(werr, coalesce.ErrClosed):
		return true, closingError{}
	case ctx.Err() != nil:
		return true, ctx.Err()
	}
	return true, &ConsistencyTimeoutError{Source: source, Wait: wait, Behind: behind, LastErr: lastErr}
}

// close wakes every waiter and stops the pollers, waiting for them to exit.
func (w *waiter) close() {
	w.mu.Lock()
	w.closed = true
	pollers := w.pollers
	w.pollers = nil
	stop, watched := w.stopWatch, w.watched
	w.mu.Unlock()
	if stop != nil {
		stop()
		<-watched
	}
	for _, p := range pollers {
		p.Close()
	}
}

// ReadReadiness tells whether the document view has applied a consistency
// token, so that a WRITE_READY job can be reported READ_READY; it satisfies
// ingest.ReadReadiness. It is monotone, as that interface requires: a view
// row's last index only grows. A token held back by a quarantine is not
// ready.
type ReadReadiness struct {
	Store Store
}

// ReadReady reports whether the document view has applied every
// coordinate of the token.
func (r ReadReadiness) ReadReady(ctx context.Context, token oplog.ConsistencyToken) (bool, error) {
	coords := followed(SourceDocView, token)
	if len(coords) == 0 {
		return true, nil
	}
	prog, err := r.Store.Progress(ctx, SourceDocView, streamsOf(coords))
	if err != nil {
		return false, fmt.Errorf("check whether the document view reached a token: %w", err)
	}
	behind, qerr := evaluate(SourceDocView, coords, prog)
	return qerr == nil && len(behind) == 0, nil
}
