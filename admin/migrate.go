package admin

import (
	"context"

	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors/catalog"
	"github.com/doclog/doclog/projectors/pgproj"
)

// Migrations are every Postgres migration set doclog applies, the log's
// first, then the projector runner's and each projector's of the catalog
// that keeps tables in Postgres: the built-in ones, then those registered
// (catalog.Register), so a worker binary's migrate applies its own too.
func Migrations() []pgmigrate.Set {
	sets := []pgmigrate.Set{postgres.Migrations(), pgproj.RunnerMigrations()}
	for _, spec := range catalog.All() {
		if spec.Migrations != nil {
			sets = append(sets, spec.Migrations())
		}
	}
	return sets
}

// MigrateAll applies every pending migration of Migrations, and returns how
// many it applied: the migrations MigrationStatuses lists that were
// pending. It is safe to run from many processes at once.
func MigrateAll(ctx context.Context, store *postgres.Store) (int, error) {
	applied, err := pgmigrate.Migrate(ctx, store.Pool(), Migrations()...)
	return len(applied), err
}

// MigrationStatuses lists every migration MigrateAll applies, in its order:
// by component (log, runner, docview, indexer, then those of registered
// projectors), each in version order.
func MigrationStatuses(ctx context.Context, store *postgres.Store) ([]pgmigrate.Status, error) {
	return pgmigrate.Statuses(ctx, store.Pool(), Migrations()...)
}

// MigrationCounts are how many of the migrations listed are applied, and
// how many there are: "applied/known" wherever doclog reports them.
func MigrationCounts(statuses []pgmigrate.Status) (applied, known int) {
	for _, st := range statuses {
		known++
		if st.Applied() {
			applied++
		}
	}
	return applied, known
}
