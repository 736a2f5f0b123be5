package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
)

// TestTailOrdersByTransactionID pages rows whose transaction ids differ in
// their number of digits. The tail once sorted by the text of the id (an
// output column named txid hid the xid8 column from ORDER BY), so a page
// from 997.6 started with 1000.8, its cursor stepped past 999.7, and that
// row was never handed out: skips that only happen while the cluster's
// transaction counter crosses a power of ten, which is why a concurrent
// stress test saw them in a few runs and never alone. The ids here are
// chosen, not drawn, so every boundary below the cluster's horizon is
// crossed on every run.
func TestTailOrdersByTransactionID(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := newPool(t, true)
	store := postgres.New(pool)

	// Every chosen id must be below the oldest running transaction, and a
	// fresh cluster may not have reached 1000 yet.
	horizon := tailHorizon(ctx, t, pool)
	for horizon < 1_100 {
		_, err := pool.Exec(ctx, `SELECT pg_current_xact_id()`)
		require.NoError(t, err)
		horizon = tailHorizon(ctx, t, pool)
	}
	var txids []uint64
	for p := uint64(10); p+2 < horizon; p *= 10 {
		txids = append(txids, p-2, p-1, p, p+1)
	}
	// Inserted from the largest id down, so ordinals run against the ids:
	// the tail's order is the transaction's, and ordinal only within one.
	slices.Reverse(txids)
	for i, txid := range txids {
		for n := range 2 {
			_, err := pool.Exec(ctx, `INSERT INTO operations (txid, document_id, scope, branch, idx, op_id, job_id,
	document_type, model_version, hash, ts_utc_ms, action_id, action)
VALUES ($1::text::xid8, $2, 'global', 'main', $3, $4, 'job', 't', 1, 'h', 0, 'a', '{}')`,
				strconv.FormatUint(txid, 10), fmt.Sprintf("doc-%d", i), n, fmt.Sprintf("op-%d-%d", txid, n))
			require.NoError(t, err)
		}
	}
	want := make([]string, 0, 2*len(txids))
	slices.Sort(txids)
	for _, txid := range txids {
		want = append(want, fmt.Sprintf("op-%d-0", txid), fmt.Sprintf("op-%d-1", txid))
	}

	for _, limit := range []int{1, 2, 3, 7, 1000} {
		var got []string
		var cur oplog.Cursor
		for range len(want) + 1 {
			page, err := store.Tail(ctx, cur, limit)
			require.NoError(t, err)
			if len(page.Operations) == 0 {
				break
			}
			for _, op := range page.Operations {
				got = append(got, op.OpID)
			}
			cur = page.Next
		}
		require.Equal(t, want, got, "limit %d: every row once, in transaction id order", limit)
	}

	// The reported case itself: past 997's rows, 998's and 999's come
	// before 1000's.
	for _, c := range []struct {
		after oplog.Cursor
		first string
	}{{"997.9223372036854775807", "op-998-0"}, {"999.9223372036854775807", "op-1000-0"}} {
		page, err := store.Tail(ctx, c.after, 1)
		require.NoError(t, err)
		require.Len(t, page.Operations, 1)
		require.Equal(t, c.first, page.Operations[0].OpID, "the first row after %s", c.after)
	}

	// And in the tail's index order, not sorted after reading every row
	// past the cursor (a table this small would be sorted by choice: the
	// other scans are off so that only a sort the index cannot spare shows).
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`)
	require.NoError(t, err)
	text := explain(ctx, t, tx, postgres.TailSQL, "0", int64(0), 10)
	require.Contains(t, text, "operations_tail", "the tail reads its index:\n%s", text)
	require.NotContains(t, text, "Sort", "the index gives the order:\n%s", text)
}

// tailHorizon is the bound the tail reads below.
func tailHorizon(ctx context.Context, t *testing.T, pool *pgxpool.Pool) uint64 {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&s))
	v, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	return v
}
