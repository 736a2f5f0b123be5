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
