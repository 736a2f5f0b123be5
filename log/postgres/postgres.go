// Package postgres is the Postgres backend of the operation log: the embedded
// schema migrations, the migrator, and a log.Store over a pgx pool. It is the
// only package on the write side that imports pgx.
//
// Append writes a batch in one transaction after taking every written and
// read-set stream's advisory lock in one sorted statement. A batch of
// DefaultCopyThreshold operations or more takes the copy path (copy.go):
// the guards are read under the locks and the operations of the requests
// that pass go in with one binary COPY. A smaller batch is one pipelined
// round trip: BEGIN, the locks, one guarded statement that inserts the
// operations, job results and keyframes of every request whose guards hold,
// and COMMIT. A request whose guards fail writes nothing and is diagnosed
// afterwards (replay, revision mismatch, read-set conflict, duplicate
// identity); because rows are never deleted, each of those findings stays
// true once it was true, so diagnosing after the commit reports what the
// guard saw. A batch whose statement raises (for example two requests of one
// batch claiming the same identity) is re-run one request at a time under
// savepoints so the offending request fails alone.
package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	oplog "github.com/doclog/doclog/log"
)

// Store is a log.Store backed by Postgres. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	owned   bool // Close closes pool
	copyMin int  // operations from which a batch takes the copy path; 0: never
}

// DefaultCopyThreshold is the number of operations in a batch from which
// Append writes them with COPY rather than the one-round-trip insert
// (copy.go). On an idle machine and a local socket the copy path is as fast
// at one operation and faster from four (BenchmarkAppendPath), but its two
// extra round trips are each a wait for the scheduler on a busy one (and
// for the network on a remote database): in the pipeline at moderate load,
// batches of about 50 operations reached READ_READY faster on the single
// round trip (docs/log.md). From a few hundred operations COPY's cheaper
// rows win whatever the round trips cost.
const DefaultCopyThreshold = 256

// Option configures a Store.
type Option func(*Store)

// WithCopyThreshold sets the number of operations from which a batch takes
// the copy path; 0 turns the copy path off. Default DefaultCopyThreshold.
func WithCopyThreshold(n int) Option {
	return func(s *Store) { s.copyMin = max(n, 0) }
}

var _ oplog.Store = (*Store)(nil)

// New returns a Store over pool. The schema must have been migrated (Migrate).
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool, copyMin: DefaultCopyThreshold}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Pool returns the pool the store uses, for health checks and metrics.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Open connects a pool to url and returns a Store over it that owns the pool:
// Close closes it. It lets callers outside the Postgres stores use the log
// without importing pgx.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("connecting to Postgres: %w", err)
	}
	return OpenConfig(ctx, cfg)
}

// OpenConfig is Open with a parsed configuration (pgxpool.ParseConfig), for
// callers that set more than the URL says, such as a connect timeout.
func OpenConfig(ctx context.Context, cfg *pgxpool.Config) (*Store, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to Postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to Postgres: %w", err)
	}
	s := New(pool)
	s.owned = true
	return s, nil
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
