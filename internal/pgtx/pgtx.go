// Package pgtx holds what the Postgres stores (the log's, the projectors'
// and the read store's) share: transactions they run by hand on a
// connection, so that BEGIN, COMMIT and their neighbours can share round
// trips, and telling a connection's failure from a statement's.
package pgtx

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// NoSeqScan is the select-list item that turns sequential scans off for the
// rest of the transaction (set_config, transaction-local), for transactions
// whose statements all read or write by key: the log's append and the
// projectors' batches. A plan is cached per connection until its table is
// next analyzed, and one made while a table held a few rows (a new
// installation, a benchmark's fresh schema) is a sequential scan that stays
// in use while the table grows: the append's lookup of settled jobs, for
// one, compared every row of jobs with every job id of the batch, 69 ms on
// average and 1.4 s at worst with 85,000 rows written in half a minute,
// against 0.5 ms (docs/log.md). With sequential scans off, a plan made on a
// small table is the index plan it should be on a large one.
const NoSeqScan = `set_config('enable_seqscan', 'off', true)`

// Rollback ends the transaction a failed batch left open on conn. A
// connection that cannot be brought back to idle is closed rather than
// returned to the pool in a transaction.
func Rollback(ctx context.Context, conn *pgx.Conn) {
	if conn.PgConn().TxStatus() == 'I' {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
		_ = conn.Close(rctx)
	}
}

// Unreachable reports an error of the connection rather than of the
// statement: the server cannot be reached, is shutting down or refusing
// connections, or the connection broke. The Postgres stores turn such errors
// into their package's unavailability error (oplog.Unavailable,
// readstore.ErrUnavailable), so callers classify failures without knowing the
// driver. A deadline that passed while connecting or waiting for a pooled
// connection is one (context.DeadlineExceeded is a timeout net.Error).
func Unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 08: connection exception; 57P01-57P03: the server is shutting
		// down, crashed or not accepting connections yet; 53300: too many
		// connections.
		code := pgErr.Code
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "53300"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.SafeToRetry(err) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	// A connection that broke mid-statement surfaces from pgx as a plain
	// error; this is the one place that knows its wording.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "conn busy") || strings.Contains(msg, "failed to connect")
}
