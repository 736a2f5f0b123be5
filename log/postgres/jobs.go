package postgres

import (
	"context"
	"fmt"
	"time"
)

// The log's Store answers job results by id; a verifier must also meet every
// job, including those whose operations are gone. These two reads of the
// jobs table list them: ids and times only, so decoding a result stays with
// JobResults.

// JobIDs pages the ids of stored job results in id order (byte order, as
// the primary key sorts them) after the given one, limit at most.
func (s *Store) JobIDs(ctx context.Context, after string, limit int) (_ []string, err error) {
	defer markUnavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT job_id FROM jobs WHERE job_id > $1 ORDER BY job_id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing job results after %q: %w", after, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("listing job results after %q: %w", after, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing job results after %q: %w", after, err)
	}
	return ids, nil
}

// OldestJobResult is when the oldest job result kept was written (zero when
// there is none). Retention removes results oldest first, so an operation
// written at or after it must still have its job's result.
func (s *Store) OldestJobResult(ctx context.Context) (_ time.Time, err error) {
	defer markUnavailable(&err)
	var t *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(created_at) FROM jobs`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("reading the oldest job result: %w", err)
	}
	if t == nil {
		return time.Time{}, nil
	}
	return *t, nil
}
