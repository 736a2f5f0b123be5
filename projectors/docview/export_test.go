package docview

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
)

// The view as its tests observe it: the read store and ingest reach the
// same answers through readstore/pgread and readstore.ReadReadiness.

// SlugOwner returns the document holding slug and whether one does.
func (v *View) SlugOwner(ctx context.Context, slug, branch string) (string, bool, error) {
	var id string
	err := v.pool.QueryRow(ctx, `SELECT document_id FROM slug_mappings WHERE slug = $1 AND branch = $2`, slug, branch).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("docview: slug owner of %q: %w", slug, err)
	}
	return id, true, nil
}

// Wait polls Reached every interval until the token is reached, the stream
// is quarantined, or ctx ends (a bounded wait is the caller's deadline).
func (v *View) Wait(ctx context.Context, token oplog.ConsistencyToken, interval time.Duration) error {
	return projectors.Wait(ctx, interval, func(ctx context.Context) (bool, error) { return v.Reached(ctx, token) })
}

// JobStatus derives a job's status as reported to clients: a WRITE_READY
// result whose token the view has reached is READ_READY; anything else is
// reported as stored.
func (v *View) JobStatus(ctx context.Context, result oplog.JobResult) (oplog.JobStatus, error) {
	if result.Status != oplog.JobWriteReady {
		return result.Status, nil
	}
	ok, err := v.Reached(ctx, result.Token)
	if err != nil {
		return result.Status, err
	}
	if ok {
		return oplog.JobReadReady, nil
	}
	return result.Status, nil
}

// Reached reports whether the view has applied every coordinate of the
// token. A coordinate on a quarantined stream that is not reached yet is a
// *projectors.QuarantinedError: it cannot be reached until the quarantine is
// lifted (the read store answers 409).
func (v *View) Reached(ctx context.Context, token oplog.ConsistencyToken) (bool, error) {
	return projectors.Reached(ctx, token, Name, v.AppliedIndexes, v.store, nil)
}
