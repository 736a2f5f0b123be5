package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TailStatus is how far the global tail can advance and how fresh the log is.
type TailStatus struct {
	// OldestTransactionAge is the age of the oldest transaction holding a
	// snapshot or an xid anywhere in the cluster: the tail cannot pass it
	// (the xmin bound is cluster-wide), so this is what to alert on.
	OldestTransactionAge time.Duration `json:"oldestTransactionAge"`
	// LastWrittenAt is when the newest committed operation was written;
	// zero when the log is empty.
	LastWrittenAt time.Time `json:"lastWrittenAt,omitzero"`
}

// TailStatus reports the tail's blocker and the log's freshness.
func (s *Store) TailStatus(ctx context.Context) (TailStatus, error) {
	var st TailStatus
	var secs float64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM now() - min(xact_start)), 0)::float8
FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL) AND xact_start IS NOT NULL`).Scan(&secs)
	if err != nil {
		return st, fmt.Errorf("reading the oldest transaction's age: %w", err)
	}
	st.OldestTransactionAge = time.Duration(secs * float64(time.Second))
	err = s.pool.QueryRow(ctx, `SELECT written_at FROM operations ORDER BY txid DESC, ordinal DESC LIMIT 1`).Scan(&st.LastWrittenAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, fmt.Errorf("reading the newest operation: %w", err)
	}
	return st, nil
}

// DeleteJobResultsBefore deletes the results of jobs settled before t, in
// batches so no delete holds a long transaction (which would hold the tail
// back), and returns how many it deleted. A job must not be re-delivered
// after its result is gone, so callers keep results at least as long as the
// jobs topic keeps records.
func (s *Store) DeleteJobResultsBefore(ctx context.Context, t time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM jobs WHERE job_id IN (
    SELECT job_id FROM jobs WHERE created_at < $1 ORDER BY created_at LIMIT 5000)`, t)
		if err != nil {
			return total, fmt.Errorf("deleting job results before %s: %w", t.Format(time.RFC3339), err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 5000 {
			return total, nil
		}
	}
}
