package pgmigrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/pgmigrate"
)

// The tables of the two migrators before pgmigrate, exactly as they created
// them: the log's versions alone in one, every projector set's by component
// in the other.
const (
	earlierLogTable = `CREATE TABLE IF NOT EXISTS doclog_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
	earlierProjectorTable = `CREATE TABLE IF NOT EXISTS doclog_projector_migrations (
    component  text NOT NULL,
    version    integer NOT NULL,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)`
)

// migrateTheEarlierWay applies sets as the earlier migrators did: each
// migration in a transaction with its row, the log's in doclog_migrations
// and the others' in doclog_projector_migrations. It returns every row's
// applied time by component and version.
func migrateTheEarlierWay(t *testing.T, pool *pgxpool.Pool, sets ...pgmigrate.Set) map[[2]any]time.Time {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, earlierLogTable)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, earlierProjectorTable)
	require.NoError(t, err)
	for _, s := range sets {
		ms, err := s.Migrations()
		require.NoError(t, err)
		for _, m := range ms {
			require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, m.SQL); err != nil {
					return err
				}
				if s.Component == postgres.Component {
					_, err = tx.Exec(ctx, `INSERT INTO doclog_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
				} else {
					_, err = tx.Exec(ctx, `INSERT INTO doclog_projector_migrations (component, version, name) VALUES ($1, $2, $3)`,
						s.Component, m.Version, m.Name)
				}
				return err
			}), "%s %d", s.Component, m.Version)
		}
	}
	return earlierRows(t, pool)
}

func earlierRows(t *testing.T, pool *pgxpool.Pool) map[[2]any]time.Time {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT 'log', version, applied_at FROM doclog_migrations
UNION ALL SELECT component, version, applied_at FROM doclog_projector_migrations`)
	require.NoError(t, err)
	out := map[[2]any]time.Time{}
	var (
		c  string
		v  int
		at time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&c, &v, &at}, func() error {
		out[[2]any{c, v}] = at
		return nil
	})
	require.NoError(t, err)
	return out
}

// A schema the earlier migrators migrated in full: the first run adopts
// their rows and applies nothing, status lists every migration as applied
// at the time the earlier migrator applied it (before the run too), and the
// earlier tables stay as they were for an earlier binary.
func TestUpgradeFromTheEarlierMigrators(t *testing.T) {
	t.Parallel()
	pool := newPool(t, testenv.PostgresSchema(t))
	ctx := context.Background()
	earlier := migrateTheEarlierWay(t, pool, sets()...)
	all := allMigrations(t)
	require.Len(t, earlier, len(all))

	requireAppliedAt := func(when string) {
		t.Helper()
		statuses, err := pgmigrate.Statuses(ctx, pool, sets()...)
		require.NoError(t, err)
		require.Len(t, statuses, len(all), when)
		for i, st := range statuses {
			require.Equal(t, all[i].Component, st.Component, when)
			require.Equal(t, all[i].Version, st.Version, when)
			require.Equal(t, all[i].Name, st.Name, when)
			require.True(t, st.Applied(), "%s: %s %d", when, st.Component, st.Version)
			require.True(t, earlier[[2]any{st.Component, st.Version}].Equal(st.AppliedAt), "%s: %s %d applied when the earlier migrator applied it", when, st.Component, st.Version)
		}
	}
	requireAppliedAt("before the first run")

	applied, err := pgmigrate.Migrate(ctx, pool, sets()...)
	require.NoError(t, err)
	require.Empty(t, applied, "nothing the earlier migrators applied is applied again")
	requireAppliedAt("after the first run")
	requireSingleVersion(t, pool, all)

	again, err := pgmigrate.Migrate(ctx, pool, sets()...)
	require.NoError(t, err)
	require.Empty(t, again)
	require.Equal(t, earlier, earlierRows(t, pool), "the earlier tables are left as they were")
}

// A schema the earlier migrators migrated in part (the log and the runner,
// say, before a projector was enabled): their rows are adopted, and only the
// rest is applied.
func TestUpgradeAppliesOnlyWhatTheEarlierMigratorsDidNot(t *testing.T) {
	t.Parallel()
	pool := newPool(t, testenv.PostgresSchema(t))
	ctx := context.Background()
	earlier := migrateTheEarlierWay(t, pool, sets()[:2]...)
	var want []pgmigrate.Migration
	for _, s := range sets()[2:] {
		ms, err := s.Migrations()
		require.NoError(t, err)
		want = append(want, ms...)
	}

	requireAppliedAsEarlier(t, pool, earlier)

	applied, err := pgmigrate.Migrate(ctx, pool, sets()...)
	require.NoError(t, err)
	require.Equal(t, want, applied, "only the sets the earlier migrators had not applied")
	requireSingleVersion(t, pool, allMigrations(t))
}

// During a rolling upgrade an earlier binary's projector migrator, under a
// lock of its own, may apply a set after the new migrator's first run: the
// next run adopts that row too instead of applying the set again, and
// status lists it as applied before then.
func TestUpgradeAdoptsWhatAnEarlierBinaryAppliesLater(t *testing.T) {
	t.Parallel()
	pool := newPool(t, testenv.PostgresSchema(t))
	ctx := context.Background()
	migrateTheEarlierWay(t, pool, sets()[:2]...)
	first, err := pgmigrate.Migrate(ctx, pool, sets()[:2]...)
	require.NoError(t, err)
	require.Empty(t, first)

	earlier := migrateTheEarlierWay(t, pool, sets()[2])
	requireAppliedAsEarlier(t, pool, earlier)

	applied, err := pgmigrate.Migrate(ctx, pool, sets()...)
	require.NoError(t, err)
	want, err := sets()[3].Migrations()
	require.NoError(t, err)
	require.Equal(t, want, applied, "the earlier binary's set is adopted, the rest applied")
	requireSingleVersion(t, pool, allMigrations(t))
}

// requireAppliedAsEarlier checks that status lists as applied the migrations
// the earlier migrators recorded, and those alone.
func requireAppliedAsEarlier(t *testing.T, pool *pgxpool.Pool, earlier map[[2]any]time.Time) {
	t.Helper()
	statuses, err := pgmigrate.Statuses(context.Background(), pool, sets()...)
	require.NoError(t, err)
	for _, st := range statuses {
		_, before := earlier[[2]any{st.Component, st.Version}]
		require.Equal(t, before, st.Applied(), "%s %d", st.Component, st.Version)
	}
}
