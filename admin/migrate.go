package admin

import (
	"context"

	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/pgproj"
)

// MigrateAll applies the log's migrations and every Postgres projector's,
// and returns how many it applied. Like each migrator, it is safe to run
// from many processes at once.
func MigrateAll(ctx context.Context, store *postgres.Store) (int, error) {
	applied, err := store.Migrate(ctx)
	if err != nil {
		return 0, err
	}
	n := len(applied)
	for _, set := range []pgproj.MigrationSet{pgproj.RunnerMigrations(), docview.Migrations(), indexer.Migrations()} {
		applied, err := pgproj.Migrate(ctx, store.Pool(), set)
		if err != nil {
			return n, err
		}
		n += len(applied)
	}
	return n, nil
}
