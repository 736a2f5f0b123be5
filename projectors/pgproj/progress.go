package pgproj

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/doclog/doclog/internal/backoff"
)

// ProgressChannel is the Postgres notification channel on which every
// checkpointed projector transaction announces, as it commits, that the
// projector has moved: the payload is the schema the transaction wrote and
// the projector's name, separated by a space. A reader waiting for a
// projection to reach a consistency token looks again at once rather than
// at its next poll, which is what this is for; the notification carries no
// positions, so a reader that misses one (it was reconnecting) loses only
// the latency its poll interval bounds.
const ProgressChannel = "doclog_projected"

// notifySQL goes in the transaction's last round trip, with the checkpoints
// and COMMIT: the notification is delivered when, and only if, the
// transaction commits, and costs no round trip of its own.
const notifySQL = `SELECT pg_notify($1, current_schema() || ' ' || $2)`

// Backoff between attempts to re-establish the listening connection.
const (
	watchBackoffBase = 100 * time.Millisecond
	watchBackoffMax  = 5 * time.Second
)

// WatchProgress calls progressed with the projector's name each time a
// projector transaction of pool's schema (the first of its search path)
// commits, until ctx ends. It listens on a connection of its own, made
// with pool's settings, so it holds none of the pool's. A failed
// connection is logged through failed (which may be nil) and made again
// after a backoff of 100 ms doubling to 5 s; notifications sent meanwhile
// are lost, which costs a reader only the latency of its fallback poll.
// progressed runs on the watching goroutine and must be quick.
func WatchProgress(ctx context.Context, pool *pgxpool.Pool, progressed func(projector string), failed func(error)) {
	for attempt := 1; ctx.Err() == nil; attempt++ {
		listened, err := watchOnce(ctx, pool, progressed)
		if ctx.Err() != nil {
			return
		}
		if listened {
			attempt = 1 // it worked for a while: start the backoff over
		}
		if failed != nil {
			failed(err)
		}
		t := time.NewTimer(backoff.Exponential(watchBackoffBase, watchBackoffMax, attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watchOnce listens on one connection until it fails or ctx ends, and
// reports whether it got as far as listening.
func watchOnce(ctx context.Context, pool *pgxpool.Pool, progressed func(projector string)) (listened bool, err error) {
	cfg := pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect to listen on %s: %w", ProgressChannel, err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return false, fmt.Errorf("read the schema to listen for: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+ProgressChannel); err != nil {
		return false, fmt.Errorf("listen on %s: %w", ProgressChannel, err)
	}
	prefix := schema + " "
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return true, ctx.Err()
			}
			return true, fmt.Errorf("wait for a notification on %s: %w", ProgressChannel, err)
		}
		if projector, ok := strings.CutPrefix(n.Payload, prefix); ok {
			progressed(projector)
		}
	}
}
