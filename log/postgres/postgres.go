// Package postgres is the Postgres backend of the operation log: the embedded
// schema migrations, the migrator, and a log.Store over a pgx pool. It is the
// only package on the write side that imports pgx.
//
// Append sends a whole batch as one pipelined round trip: BEGIN, one sorted
// advisory-lock statement over every written and read-set stream, one guarded
// statement that inserts the operations, job results and keyframes of every
// request whose guards hold, and COMMIT. A request whose guards fail writes
// nothing and is diagnosed afterwards (replay, revision mismatch, read-set
// conflict, duplicate identity); because rows are never deleted, each of
// those findings stays true once it was true, so diagnosing after the commit
// reports what the guard saw. A batch whose statement raises (for example two
// requests of one batch claiming the same identity) is re-run one request at
// a time under savepoints so the offending request fails alone.
package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	oplog "github.com/doclog/doclog/log"
)

// Store is a log.Store backed by Postgres. It is safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	owned bool // Close closes pool
}

var _ oplog.Store = (*Store)(nil)

// New returns a Store over pool. The schema must have been migrated (Migrate).
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool}
}

// Pool returns the pool the store uses, for health checks and metrics.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Open connects a pool to url and returns a Store over it that owns the pool:
// Close closes it. It lets callers outside the Postgres stores use the log
// without importing pgx.
func Open(ctx context.Context, url string) (*Store, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connecting to Postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to Postgres: %w", err)
	}
	return &Store{pool: pool, owned: true}, nil
}

// Close closes the pool if the store opened it (Open); a store made with New
// leaves its pool to the caller.
func (s *Store) Close() {
	if s.owned {
		s.pool.Close()
	}
}

// Ping reports whether the database answers, for readiness checks.
func (s *Store) Ping(ctx context.Context) (err error) {
	defer markUnavailable(&err)
	return s.pool.Ping(ctx)
}

// Migrate applies pending migrations (see the package function Migrate).
func (s *Store) Migrate(ctx context.Context) ([]int, error) { return Migrate(ctx, s.pool) }

// MigrationStatuses lists migrations (see the package function).
func (s *Store) MigrationStatuses(ctx context.Context) ([]MigrationStatus, error) {
	return MigrationStatuses(ctx, s.pool)
}
