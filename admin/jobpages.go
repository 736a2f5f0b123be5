package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/doclog/doclog/log/postgres"
)

// The log's Store answers job results by id but lists none, and verifying
// needs to meet every job, including those whose operations are gone. These
// two reads of the jobs table are that listing; they return ids and times
// only, so decoding a result stays the store's (JobResults). They belong in
// log/postgres beside JobResults.

// listJobIDs pages the ids of stored job results in id order after cursor.
func listJobIDs(ctx context.Context, store *postgres.Store, after string, limit int) ([]string, error) {
	rows, err := store.Pool().Query(ctx, `SELECT job_id FROM jobs WHERE job_id > $1 ORDER BY job_id LIMIT $2`, after, limit)
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

// oldestJobResult is the creation time of the oldest job result kept (zero
// when there is none). Retention removes results oldest first, so an
// operation written at or after it must still have its job's result.
func oldestJobResult(ctx context.Context, store *postgres.Store) (time.Time, error) {
	var t *time.Time
	if err := store.Pool().QueryRow(ctx, `SELECT min(created_at) FROM jobs`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("reading the oldest job result: %w", err)
	}
	if t == nil {
		return time.Time{}, nil
	}
	return *t, nil
}
