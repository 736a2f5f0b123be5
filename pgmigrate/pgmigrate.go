// Package pgmigrate is doclog's one Postgres migrator: the operation log's
// schema and every projector's are numbered SQL files in sets, one set per
// component (log, runner, docview, indexer, or a projector of another
// module), applied under one advisory lock and recorded in one table,
// doclog_schema_migrations, keyed by component and version. Each component
// numbers its own files, so adding a projector never renumbers another's
// schema.
//
// It is a package of its own, beside log/postgres rather than inside it,
// because the sets' owners must not depend on each other to share it: the
// projector stores (projectors/pgproj and the projectors over it) read the
// log through the log.Store interface, never through its Postgres backend,
// and a projector written in another module declares its set here without
// importing either. It speaks pgx, as every Postgres store of doclog does.
//
// Databases migrated before this package existed recorded the log's
// versions in doclog_migrations and the projectors' in
// doclog_projector_migrations. The first Migrate adopts those rows into
// doclog_schema_migrations, in the locked transaction that creates it, so
// nothing applied then is applied again. The earlier tables are left as they
// are: an earlier binary started against the schema (a rollback) still finds
// its own migrations there and applies none of them twice. While they exist,
// every later Migrate adopts, in the same way, any row they gained since: an
// earlier binary's projector migrator, which took a lock of its own, may
// have applied a set during a rolling upgrade.
package pgmigrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Table is where applied migrations are recorded, one row per component and
// version.
const Table = "doclog_schema_migrations"

// The tables of the migrators before this one, whose rows are adopted.
const (
	legacyLogTable = "doclog_migrations"
	// legacyLogComponent is the component the log's set declares: the
	// earlier log table had no component column, since it held the log's
	// versions alone.
	legacyLogComponent   = "log"
	legacyProjectorTable = "doclog_projector_migrations"
)

// lockKey is the advisory lock every migrator of a schema takes. It is the
// key the earlier log migrator took, so that during a rolling upgrade an
// earlier binary migrating the log and this one never run at once.
const lockKey = `hashtextextended('doclog.migrate:' || current_schema(), 0)`

// Set is one component's numbered SQL migrations: the NNN_name.sql files in
// Dir of FS (other files are ignored).
type Set struct {
	// Component names the set in the migrations table; it must be unique
	// among the sets of a schema and stay the same for the set's life.
	Component string
	FS        fs.FS
	Dir       string
}

// Migration is one numbered SQL file of a set.
type Migration struct {
	Component string
	Version   int
	Name      string
	SQL       string
}

// Migrations returns the set's migrations in version order.
func (s Set) Migrations() ([]Migration, error) {
	if s.Component == "" {
		return nil, errors.New("a migration set must name its component")
	}
	entries, err := fs.ReadDir(s.FS, s.Dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s migrations: %w", s.Component, err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		if !ok {
			return nil, fmt.Errorf("%s migration file %s: want NNN_name.sql", s.Component, name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("%s migration file %s: version %q is not a number", s.Component, name, num)
		}
		body, err := fs.ReadFile(s.FS, path.Join(s.Dir, name))
		if err != nil {
			return nil, fmt.Errorf("reading %s migration %s: %w", s.Component, name, err)
		}
		out = append(out, Migration{Component: s.Component, Version: v, Name: rest, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two %s migrations share version %d", s.Component, out[i].Version)
		}
	}
	return out, nil
}

// Status is a migration and when it was applied (zero while pending).
type Status struct {
	Component string    `json:"component"`
	Version   int       `json:"version"`
	Name      string    `json:"name"`
	AppliedAt time.Time `json:"appliedAt"`
}

// Applied reports whether the migration has been applied.
func (s Status) Applied() bool { return !s.AppliedAt.IsZero() }

// Migrate applies every pending migration of sets, set by set in the order
// given and each set in version order, each migration in its own
// transaction, and returns those it applied. Many processes may call it at
// once: a session advisory lock keyed by the schema serializes them, and
// each finds the work of the ones before it done. On an error it returns
// the migrations applied before it.
func Migrate(ctx context.Context, pool *pgxpool.Pool, sets ...Set) ([]Migration, error) {
	bySet, err := migrationsOf(sets)
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring a connection to migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`); err != nil {
		return nil, fmt.Errorf("taking the migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must be released even when ctx ended.
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(`+lockKey+`)`); err != nil {
			_ = conn.Conn().Close(uctx) // the session ends, and its lock with it
		}
	}()
	tables, err := existingTables(ctx, conn.Conn())
	if err != nil {
		return nil, err
	}
	if !tables.current || tables.legacyLog || tables.legacyProjector {
		if err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error { return createAndAdopt(ctx, tx, tables) }); err != nil {
			return nil, fmt.Errorf("preparing the migrations table %s: %w", Table, err)
		}
	}
	// Every row of the earlier tables is in Table now.
	done, err := appliedRows(ctx, conn.Conn(), presentTables{current: true})
	if err != nil {
		return nil, err
	}
	var applied []Migration
	for _, m := range slices.Concat(bySet...) {
		if _, ok := done[key{m.Component, m.Version}]; ok {
			continue
		}
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+Table+` (component, version, name) VALUES ($1, $2, $3)`, m.Component, m.Version, m.Name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("applying %s migration %03d_%s: %w", m.Component, m.Version, m.Name, err)
		}
		applied = append(applied, m)
	}
	return applied, nil
}

// Statuses lists every migration of sets with its applied time, set by set
// in the order given, each in version order with the versions of its
// component applied that this binary does not know (a newer binary ran). It
// reads the earlier migrators' tables too, so it lists as applied what the
// next Migrate adopts.
func Statuses(ctx context.Context, pool *pgxpool.Pool, sets ...Set) ([]Status, error) {
	bySet, err := migrationsOf(sets)
	if err != nil {
		return nil, err
	}
	tables, err := existingTables(ctx, pool)
	if err != nil {
		return nil, err
	}
	done, err := appliedRows(ctx, pool, tables)
	if err != nil {
		return nil, err
	}
	var out []Status
	for i, ms := range bySet {
		component := sets[i].Component
		var set []Status
		for _, m := range ms {
			st := Status{Component: component, Version: m.Version, Name: m.Name}
			k := key{component, m.Version}
			if r, ok := done[k]; ok {
				st.AppliedAt = r.at
				delete(done, k)
			}
			set = append(set, st)
		}
		for k, r := range done {
			if k.component == component {
				set = append(set, Status{Component: component, Version: k.version, Name: r.name, AppliedAt: r.at})
			}
		}
		sort.Slice(set, func(i, j int) bool { return set[i].Version < set[j].Version })
		out = append(out, set...)
	}
	return out, nil
}

// migrationsOf is each set's migrations, in the order of sets.
func migrationsOf(sets []Set) ([][]Migration, error) {
	seen := map[string]bool{}
	out := make([][]Migration, len(sets))
	for i, s := range sets {
		if seen[s.Component] {
			return nil, fmt.Errorf("two migration sets name the component %q", s.Component)
		}
		seen[s.Component] = true
		ms, err := s.Migrations()
		if err != nil {
			return nil, err
		}
		out[i] = ms
	}
	return out, nil
}

// presentTables says which migrations tables the schema has.
type presentTables struct{ current, legacyLog, legacyProjector bool }

// querier is a connection or a pool: Migrate reads under its lock on its
// own connection, Statuses on any of the pool's.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func existingTables(ctx context.Context, conn querier) (presentTables, error) {
	// Looked up in the schema the migrations go to, not along the whole
	// search path, so another schema's tables are never taken for these.
	var t presentTables
	err := conn.QueryRow(ctx, `SELECT
    to_regclass(format('%I.%I', current_schema(), $1::text)) IS NOT NULL,
    to_regclass(format('%I.%I', current_schema(), $2::text)) IS NOT NULL,
    to_regclass(format('%I.%I', current_schema(), $3::text)) IS NOT NULL`,
		Table, legacyLogTable, legacyProjectorTable).Scan(&t.current, &t.legacyLog, &t.legacyProjector)
	if err != nil {
		return t, fmt.Errorf("looking for the migrations tables: %w", err)
	}
	return t, nil
}

// createAndAdopt creates the migrations table if need be and copies into it
// the earlier migrators' rows it does not have, in tx.
func createAndAdopt(ctx context.Context, tx pgx.Tx, t presentTables) error {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+Table+` (
    component  text NOT NULL,
    version    integer NOT NULL,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)`); err != nil {
		return err
	}
	if q := legacyRows(t); q != "" {
		if _, err := tx.Exec(ctx, `INSERT INTO `+Table+` (component, version, name, applied_at) `+q+`
ON CONFLICT (component, version) DO NOTHING`); err != nil {
			return fmt.Errorf("adopting the rows of the earlier migrations tables: %w", err)
		}
	}
	return nil
}

// legacyRows is a query of the earlier tables' rows as (component, version,
// name, applied_at), or "" when neither exists.
func legacyRows(t presentTables) string {
	var parts []string
	if t.legacyLog {
		parts = append(parts, `SELECT '`+legacyLogComponent+`'::text, version, name, applied_at FROM `+legacyLogTable)
	}
	if t.legacyProjector {
		parts = append(parts, `SELECT component, version, name, applied_at FROM `+legacyProjectorTable)
	}
	return strings.Join(parts, " UNION ALL ")
}

type key struct {
	component string
	version   int
}

type appliedRow struct {
	name string
	at   time.Time
}

// appliedRows reads the applied migrations of the tables t names; a row of
// Table wins over an earlier table's for the same migration.
func appliedRows(ctx context.Context, conn querier, t presentTables) (map[key]appliedRow, error) {
	done := map[key]appliedRow{}
	var parts []string
	if q := legacyRows(t); q != "" {
		parts = append(parts, `SELECT 0, * FROM (`+q+`) AS earlier`)
	}
	if t.current {
		parts = append(parts, `SELECT 1, component, version, name, applied_at FROM `+Table)
	}
	if len(parts) == 0 {
		return done, nil
	}
	rows, err := conn.Query(ctx, strings.Join(parts, " UNION ALL ")+` ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("reading applied migrations: %w", err)
	}
	var (
		rank int
		k    key
		r    appliedRow
	)
	if _, err := pgx.ForEachRow(rows, []any{&rank, &k.component, &k.version, &r.name, &r.at}, func() error {
		done[k] = r
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading applied migrations: %w", err)
	}
	return done, nil
}
