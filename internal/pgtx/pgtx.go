// Package pgtx holds what the Postgres stores (the log's and the
// projectors') share about transactions they run by hand on a connection,
// so that BEGIN, COMMIT and their neighbours can share round trips.
package pgtx

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
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
