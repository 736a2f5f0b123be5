package postgres

import (
	"context"
	"embed"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/doclog/doclog/pgmigrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Component names the log's migration set in the migrations table.
const Component = "log"

// Migrations is the operation log's migration set: operations, keyframes,
// jobs and the executor's pauses. doclog's commands apply it with every
// projector's set in one pgmigrate.Migrate.
func Migrations() pgmigrate.Set {
	return pgmigrate.Set{Component: Component, FS: migrationFS, Dir: "migrations"}
}

// MigrationStatus is one of the log's migrations and when it was applied.
type MigrationStatus = pgmigrate.Status

// Migrate applies the log's pending migrations alone, through pgmigrate, and
// returns their versions: for a program that uses the log without doclog's
// projectors.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	applied, err := pgmigrate.Migrate(ctx, pool, Migrations())
	versions := make([]int, len(applied))
	for i, m := range applied {
		versions[i] = m.Version
	}
	return versions, err
}

// MigrationStatuses lists the log's migrations alone (see pgmigrate.Statuses).
func MigrationStatuses(ctx context.Context, pool *pgxpool.Pool) ([]MigrationStatus, error) {
	return pgmigrate.Statuses(ctx, pool, Migrations())
}
