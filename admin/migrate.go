package admin

import (
	"context"
	"time"

	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/pgproj"
)

// LogComponent names the operation log's own migrations among the
// components of MigrationStatuses.
const LogComponent = "log"

// projectorMigrations are the Postgres migration sets beside the log's: the
// projector runner's and each Postgres projector's.
func projectorMigrations() []pgproj.MigrationSet {
	return []pgproj.MigrationSet{pgproj.RunnerMigrations(), docview.Migrations(), indexer.Migrations()}
}

// MigrateAll applies the log's migrations and every Postgres projector's,
// and returns how many it applied: the migrations MigrationStatuses lists
// that were pending. Like each migrator, it is safe to run from many
// processes at once.
func MigrateAll(ctx context.Context, store *postgres.Store) (int, error) {
	applied, err := store.Migrate(ctx)
	if err != nil {
		return 0, err
	}
	n := len(applied)
	for _, set := range projectorMigrations() {
		applied, err := pgproj.Migrate(ctx, store.Pool(), set)
		if err != nil {
			return n, err
		}
		n += len(applied)
	}
	return n, nil
}

// MigrationStatus is one Postgres migration of a component (LogComponent,
// or a projector set's: runner, docview, indexer) and when it was applied.
type MigrationStatus struct {
	Component string    `json:"component"`
	Version   int       `json:"version"`
	Name      string    `json:"name"`
	AppliedAt time.Time `json:"appliedAt"` // zero while pending
}

// Applied reports whether the migration has been applied.
func (s MigrationStatus) Applied() bool { return !s.AppliedAt.IsZero() }

// MigrationStatuses lists every migration MigrateAll applies, the log's
// first, then each projector set's, in version order within a component.
func MigrationStatuses(ctx context.Context, store *postgres.Store) ([]MigrationStatus, error) {
	logs, err := store.MigrationStatuses(ctx)
	if err != nil {
		return nil, err
	}
	var out []MigrationStatus
	for _, st := range logs {
		out = append(out, MigrationStatus{Component: LogComponent, Version: st.Version, Name: st.Name, AppliedAt: st.AppliedAt})
	}
	for _, set := range projectorMigrations() {
		sts, err := pgproj.MigrationStatuses(ctx, store.Pool(), set)
		if err != nil {
			return nil, err
		}
		for _, st := range sts {
			out = append(out, MigrationStatus{Component: set.Component, Version: st.Version, Name: st.Name, AppliedAt: st.AppliedAt})
		}
	}
	return out, nil
}

// MigrationCounts are how many of the migrations listed are applied, and
// how many there are: "applied/known" wherever doclog reports them.
func MigrationCounts(statuses []MigrationStatus) (applied, known int) {
	for _, st := range statuses {
		known++
		if st.Applied() {
			applied++
		}
	}
	return applied, known
}
