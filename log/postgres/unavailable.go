package postgres

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	oplog "github.com/doclog/doclog/log"
)

// markUnavailable turns *errp into *oplog.Unavailable when it says the
// database cannot be reached or the connection broke, so callers classify
// failures without knowing the driver. Every exported method of Store
// defers it.
func markUnavailable(errp *error) {
	if err := *errp; err != nil && !oplog.IsUnavailable(err) && unreachable(err) {
		*errp = &oplog.Unavailable{Err: err}
	}
}

// unreachable reports errors of the connection, not of the statement.
func unreachable(err error) bool {
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
