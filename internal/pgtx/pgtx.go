// Package pgtx holds what the Postgres stores (the log's and the
// projectors') share about transactions they run by hand on a connection,
// so that BEGIN, COMMIT and their neighbours can share round trips.
package pgtx

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

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
