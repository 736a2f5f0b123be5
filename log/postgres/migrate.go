package postgres

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
var migrationFS embed.FS

// Migration is one numbered, embedded SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// MigrationStatus is a migration and when it was applied (zero if pending).
type MigrationStatus struct {
	Migration
	AppliedAt time.Time
}

// Applied reports whether the migration has been applied.
func (s MigrationStatus) Applied() bool { return !s.AppliedAt.IsZero() }

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		if !ok {
			return nil, fmt.Errorf("migration file %s: want NNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration file %s: version %q is not a number", name, num)
		}
		body, err := fs.ReadFile(migrationFS, "migrations/"+name)
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: rest, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations share version %d", out[i].Version)
		}
	}
	return out, nil
}

const migrationsTable = `CREATE TABLE IF NOT EXISTS doclog_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// Migrate applies every pending migration, each in its own transaction, and
// returns the versions it applied. Many processes may call it at once: a
// session advisory lock keyed by the schema serializes them, and each finds
// the work of the ones before it done.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring a connection to migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('doclog.migrate:' || current_schema(), 0))`); err != nil {
		return nil, fmt.Errorf("taking the migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must be released even when ctx ended.
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtextextended('doclog.migrate:' || current_schema(), 0))`); err != nil {
			conn.Conn().Close(uctx) // the session ends, and its lock with it
		}
	}()
	if _, err := conn.Exec(ctx, migrationsTable); err != nil {
		return nil, fmt.Errorf("creating the migrations table: %w", err)
	}
	done, err := appliedVersions(ctx, conn.Conn())
	if err != nil {
		return nil, err
	}
	var applied []int
	for _, m := range migrations {
		if _, ok := done[m.Version]; ok {
			continue
		}
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO doclog_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("applying migration %03d_%s: %w", m.Version, m.Name, err)
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

// MigrationStatuses lists every embedded migration with its applied time,
// plus any applied version this binary does not know (a newer binary ran).
func MigrationStatuses(ctx context.Context, pool *pgxpool.Pool) ([]MigrationStatus, error) {
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring a connection for migration status: %w", err)
	}
	defer conn.Release()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('doclog_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("looking for the migrations table: %w", err)
	}
	done := map[int]appliedRow{}
	if exists {
		if done, err = appliedVersions(ctx, conn.Conn()); err != nil {
			return nil, err
		}
	}
	out := make([]MigrationStatus, 0, len(migrations))
	for _, m := range migrations {
		st := MigrationStatus{Migration: m}
		if r, ok := done[m.Version]; ok {
			st.AppliedAt = r.at
			delete(done, m.Version)
		}
		out = append(out, st)
	}
	for v, r := range done {
		out = append(out, MigrationStatus{Migration: Migration{Version: v, Name: r.name}, AppliedAt: r.at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

type appliedRow struct {
	name string
	at   time.Time
}

func appliedVersions(ctx context.Context, conn *pgx.Conn) (map[int]appliedRow, error) {
	rows, err := conn.Query(ctx, `SELECT version, name, applied_at FROM doclog_migrations`)
	if err != nil {
		return nil, fmt.Errorf("reading applied migrations: %w", err)
	}
	done := map[int]appliedRow{}
	for rows.Next() {
		var v int
		var r appliedRow
		if err := rows.Scan(&v, &r.name, &r.at); err != nil {
			return nil, fmt.Errorf("reading applied migrations: %w", err)
		}
		done[v] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading applied migrations: %w", err)
	}
	return done, nil
}
