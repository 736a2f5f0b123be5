package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Drain waits until every job in the ledger has a result row, polling the
// jobs table in bulk (a status request per job per poll would load the very
// ingest being measured). It returns when the last one appeared with the ids
// that appeared in that last poll (none if the first found them all), or the time of the deadline with the ids
// still missing.
func Drain(ctx context.Context, pool *pgxpool.Pool, entries []Entry, deadline time.Time) (at time.Time, last, left []string) {
	pending := make(map[string]bool, len(entries))
	for _, e := range entries {
		pending[e.JobID] = true
	}
	for poll := 0; ; poll++ {
		before := make([]string, 0, len(pending))
		for id := range pending {
			before = append(before, id)
		}
		if err := removeSettled(ctx, pool, pending); err == nil && len(pending) == 0 {
			if poll == 0 {
				// Settled before the drain began: none came last.
				before = nil
			}
			return time.Now(), before, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		_ = sleep(ctx, 100*time.Millisecond)
	}
	for id := range pending {
		left = append(left, id)
	}
	return deadline, nil, left
}

func removeSettled(ctx context.Context, pool *pgxpool.Pool, pending map[string]bool) error {
	ids := make([]string, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 5000)]
		ids = ids[len(chunk):]
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rows, err := pool.Query(qctx, `SELECT job_id FROM jobs WHERE job_id = ANY($1)`, chunk)
		if err != nil {
			cancel()
			return fmt.Errorf("reading job results: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				cancel()
				return fmt.Errorf("reading job results: %w", err)
			}
			delete(pending, id)
		}
		rows.Close()
		cancel()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reading job results: %w", err)
		}
	}
	return nil
}
