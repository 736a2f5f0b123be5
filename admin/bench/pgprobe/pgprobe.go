// Package pgprobe holds the Postgres-specific probes of `doclogctl bench`:
// database activity counters (pg_stat_database, and pg_stat_statements when
// the extension is installed) and the raw COPY baseline the pipeline is
// compared with. It is the only part of the benchmark that imports pgx, for
// the same reason the stores are: the rest of the tool talks to doclog
// through its public seams.
package pgprobe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/doclog/doclog/internal/connflags"
)

// Activity is a snapshot of the current database's cumulative counters.
// Deltas of two snapshots measure what happened in between, across every
// session of the database (Postgres keeps no per-client figures).
type Activity struct {
	XactCommit, XactRollback int64
	TupReturned, TupFetched  int64
	TupInserted, TupUpdated  int64
	TupDeleted               int64
	// Statements is the sum of pg_stat_statements calls for the database,
	// or -1 when the extension is not installed in it.
	Statements int64
	// Probes is how many statements (each its own transaction) taking
	// this snapshot issued, for the caller to subtract as its own.
	Probes int64
}

// Sub returns a-b, counter by counter; Statements stays -1 if either side
// lacks it.
func (a Activity) Sub(b Activity) Activity {
	d := Activity{
		XactCommit: a.XactCommit - b.XactCommit, XactRollback: a.XactRollback - b.XactRollback,
		TupReturned: a.TupReturned - b.TupReturned, TupFetched: a.TupFetched - b.TupFetched,
		TupInserted: a.TupInserted - b.TupInserted, TupUpdated: a.TupUpdated - b.TupUpdated,
		TupDeleted: a.TupDeleted - b.TupDeleted, Statements: -1,
	}
	if a.Statements >= 0 && b.Statements >= 0 {
		d.Statements = a.Statements - b.Statements
	}
	return d
}

// Snapshot reads the counters. Each statement runs as its own transaction,
// so two snapshots never share Postgres's per-transaction cache of the
// statistics views. Backends report their counters when idle, at most
// once a second: a snapshot taken less than a second after the last work
// may miss some of it.
func Snapshot(ctx context.Context, pool *pgxpool.Pool) (Activity, error) {
	var a Activity
	a.Statements = -1
	// The extension's view lives in the schema it was created in, which
	// need not be on the search path.
	var schema *string
	err := pool.QueryRow(ctx, `SELECT xact_commit, xact_rollback, tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted,
  (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_stat_statements')
FROM pg_stat_database WHERE datname = current_database()`).Scan(
		&a.XactCommit, &a.XactRollback, &a.TupReturned, &a.TupFetched, &a.TupInserted, &a.TupUpdated, &a.TupDeleted, &schema)
	a.Probes = 1
	if err != nil {
		return a, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	if schema == nil {
		return a, nil
	}
	a.Probes++
	// Installed but not preloaded, the view raises: the statement count is
	// then unknown, not an error.
	var calls *int64
	err = pool.QueryRow(ctx, `SELECT sum(calls)::bigint FROM `+pgx.Identifier{*schema, "pg_stat_statements"}.Sanitize()+`
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&calls)
	if err == nil && calls != nil {
		a.Statements = *calls
	}
	return a, nil
}

// CreateSchema creates the empty schema name, on one connection of its own.
func CreateSchema(ctx context.Context, databaseURL string, connectTimeout time.Duration, name string) error {
	return execOnce(ctx, databaseURL, connectTimeout, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize(), "creating schema "+name)
}

// DropSchema drops the schema name and everything in it.
func DropSchema(ctx context.Context, databaseURL string, connectTimeout time.Duration, name string) error {
	return execOnce(ctx, databaseURL, connectTimeout, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE", "dropping schema "+name)
}

// execOnce runs sql on a connection of its own, with the connect timeout
// the log's pool would have (connflags.PoolConfig: the URL's, else
// connectTimeout, else the default).
func execOnce(ctx context.Context, databaseURL string, connectTimeout time.Duration, sql, doing string) error {
	cfg, err := connflags.PoolConfig(databaseURL, connectTimeout)
	if err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return fmt.Errorf("%s: connecting: %w", doing, connflags.ExplainConnectTimeout(ctx, err, databaseURL, cfg.ConnConfig.ConnectTimeout))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	return nil
}

// copyColumns are the operation columns a client supplies; ordinal, txid
// and written_at take their defaults, as they do on append.
var copyColumns = []string{"document_id", "scope", "branch", "idx", "skip", "op_id", "job_id", "document_type",
	"model_version", "hash", "ts_utc_ms", "action_id", "action"}

// CopyResult is the outcome of a COPY baseline.
type CopyResult struct {
	Rows    int
	Chunks  int
	Elapsed time.Duration
}

// CopyBaseline copies the operations of the given documents — the rows a
// benchmark run appended — into a scratch table created LIKE operations
// INCLUDING ALL (same columns, defaults, primary key and indexes), in the
// order they were appended, in COPYs of chunk rows, each its own
// transaction, one after another on one connection. Only the COPYs are
// timed: the rows stream from a query on another connection between them,
// so memory holds one chunk however long the run was. The scratch table is
// dropped before returning.
func CopyBaseline(ctx context.Context, pool *pgxpool.Pool, documentIDs []string, chunk int) (res CopyResult, err error) {
	if chunk <= 0 {
		return res, errors.New("copy baseline: the chunk size must be positive")
	}
	var suffix [6]byte
	now := time.Now().UnixNano()
	for i := range suffix {
		suffix[i] = "abcdefghijklmnopqrstuvwxyz"[now%26]
		now /= 26
	}
	table := pgx.Identifier{"bench_copy_" + string(suffix[:])}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table.Sanitize()+` (LIKE operations INCLUDING ALL)`); err != nil {
		return res, fmt.Errorf("copy baseline: creating the scratch table: %w", err)
	}
	defer func() {
		_, _ = pool.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+table.Sanitize())
	}()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("copy baseline: acquiring a connection: %w", err)
	}
	defer conn.Release()

	rows, err := pool.Query(ctx, `SELECT `+columnList()+` FROM operations WHERE document_id = ANY($1) ORDER BY ordinal`, documentIDs)
	if err != nil {
		return res, fmt.Errorf("copy baseline: reading the run's operations: %w", err)
	}
	defer rows.Close()
	buf := make([][]any, 0, chunk)
	flush := func() error {
		start := time.Now()
		if _, err := conn.CopyFrom(ctx, table, copyColumns, pgx.CopyFromRows(buf)); err != nil {
			return fmt.Errorf("copy baseline: copying rows %d..%d: %w", res.Rows, res.Rows+len(buf)-1, err)
		}
		res.Elapsed += time.Since(start)
		res.Rows += len(buf)
		res.Chunks++
		buf = buf[:0]
		return nil
	}
	for rows.Next() {
		var (
			doc, scope, branch, opID, jobID, docType, hash, actionID, action string
			idx, skip, ts                                                    int64
			version                                                          int32
		)
		if err := rows.Scan(&doc, &scope, &branch, &idx, &skip, &opID, &jobID, &docType, &version, &hash, &ts, &actionID, &action); err != nil {
			return res, fmt.Errorf("copy baseline: reading the run's operations: %w", err)
		}
		buf = append(buf, []any{doc, scope, branch, idx, skip, opID, jobID, docType, version, hash, ts, actionID, action})
		if len(buf) == chunk {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("copy baseline: reading the run's operations: %w", err)
	}
	if len(buf) > 0 {
		if err := flush(); err != nil {
			return res, err
		}
	}
	return res, nil
}

func columnList() string {
	s := ""
	for i, c := range copyColumns {
		if i > 0 {
			s += ", "
		}
		if c == "action" {
			c = "action::text"
		}
		s += c
	}
	return s
}

// BackendPID is the process id of the server process serving one of the
// pool's connections: its parent is the postmaster, whose process tree is
// the server whose CPU the benchmark accounts.
func BackendPID(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var pid int
	if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return 0, fmt.Errorf("reading the backend's process id: %w", err)
	}
	return pid, nil
}
