package pgproj

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var runnerFS embed.FS

// MigrationSet is one component's numbered, embedded SQL migrations
// (NNN_name.sql files in Dir of FS). Each projector has its own set, so
// adding a projector never renumbers another's schema.
type MigrationSet struct {
	// Component names the set in doclog_projector_migrations.
	Component string
	FS        fs.FS
	Dir       string
}

// Migration is one numbered SQL file of a set.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// RunnerMigrations is the runner's own set: checkpoints, stream heads and
// quarantines.
func RunnerMigrations() MigrationSet {
	return MigrationSet{Component: "runner", FS: runnerFS, Dir: "migrations"}
}

// Migrations returns the set's migrations in version order.
func (s MigrationSet) Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(s.FS, s.Dir)
	if err != nil {
		return nil, fmt.Errorf("read %s migrations: %w", s.Component, err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
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
		body, err := fs.ReadFile(s.FS, s.Dir+"/"+name)
		if err != nil {
			return nil, fmt.Errorf("read %s migration %s: %w", s.Component, name, err)
		}
		out = append(out, Migration{Version: v, Name: rest, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two %s migrations share version %d", s.Component, out[i].Version)
		}
	}
	return out, nil
}

const migrationsTable = `CREATE TABLE IF NOT EXISTS doclog_projector_migrations (
    component  text NOT NULL,
    version    integer NOT NULL,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)`

// Migrate applies the set's pending migrations, each in its own
// transaction, and returns the versions it applied. A session advisory lock
// keyed by the schema serializes concurrent callers (the same lock for every
// set, since they share the migrations table).
func Migrate(ctx context.Context, pool *pgxpool.Pool, set MigrationSet) ([]int, error) {
	migrations, err := set.Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a connection to migrate %s: %w", set.Component, err)
	}
	defer conn.Release()
	const key = `hashtextextended('doclog.projectors.migrate:' || current_schema(), 0)`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`); err != nil {
		return nil, fmt.Errorf("take the projector migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must be released even when ctx ended.
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(`+key+`)`); err != nil {
			_ = conn.Conn().Close(uctx) // the session ends, and its lock with it
		}
	}()
	if _, err := conn.Exec(ctx, migrationsTable); err != nil {
		return nil, fmt.Errorf("create the projector migrations table: %w", err)
	}
	done := map[int]bool{}
	rows, err := conn.Query(ctx, `SELECT version FROM doclog_projector_migrations WHERE component = $1`, set.Component)
	if err != nil {
		return nil, fmt.Errorf("read applied %s migrations: %w", set.Component, err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("read applied %s migrations: %w", set.Component, err)
	}
	for _, v := range versions {
		done[int(v)] = true
	}
	var applied []int
	for _, m := range migrations {
		if done[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO doclog_projector_migrations (component, version, name) VALUES ($1, $2, $3)`,
				set.Component, m.Version, m.Name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("apply %s migration %03d_%s: %w", set.Component, m.Version, m.Name, err)
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

// MigrationStatus is a migration of a set and when it was applied (zero
// if pending).
type MigrationStatus struct {
	Migration
	AppliedAt time.Time
}

// MigrationStatuses lists the set's migrations with their applied times,
// plus any applied version this binary does not know (a newer binary ran).
func MigrationStatuses(ctx context.Context, pool *pgxpool.Pool, set MigrationSet) ([]MigrationStatus, error) {
	migrations, err := set.Migrations()
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('doclog_projector_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("look for the projector migrations table: %w", err)
	}
	type applied struct {
		name string
		at   time.Time
	}
	done := map[int]applied{}
	if exists {
		rows, err := pool.Query(ctx, `SELECT version, name, applied_at FROM doclog_projector_migrations WHERE component = $1`, set.Component)
		if err != nil {
			return nil, fmt.Errorf("read applied %s migrations: %w", set.Component, err)
		}
		var (
			v    int32
			name string
			at   time.Time
		)
		if _, err := pgx.ForEachRow(rows, []any{&v, &name, &at}, func() error {
			done[int(v)] = applied{name, at}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("read applied %s migrations: %w", set.Component, err)
		}
	}
	out := make([]MigrationStatus, 0, len(migrations))
	for _, m := range migrations {
		st := MigrationStatus{Migration: m}
		if a, ok := done[m.Version]; ok {
			st.AppliedAt = a.at
			delete(done, m.Version)
		}
		out = append(out, st)
	}
	for v, a := range done {
		out = append(out, MigrationStatus{Migration: Migration{Version: v, Name: a.name}, AppliedAt: a.at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
