package pgmigrate_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/pgproj"
)

// sets are doclog's own, in the order its commands apply them.
func sets() []pgmigrate.Set { return admin.Migrations() }

// allMigrations is every migration of sets, in Migrate's order.
func allMigrations(t testing.TB) []pgmigrate.Migration {
	t.Helper()
	var all []pgmigrate.Migration
	for _, s := range sets() {
		ms, err := s.Migrations()
		require.NoError(t, err)
		require.NotEmpty(t, ms, s.Component)
		all = append(all, ms...)
	}
	return all
}

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	pool := newPool(t, testenv.PostgresSchema(t))
	ctx := context.Background()
	first, err := pgmigrate.Migrate(ctx, pool, sets()...)
	require.NoError(t, err)
	all := allMigrations(t)
	require.Equal(t, all, first, "a fresh schema: every migration, set by set in version order")
	second, err := pgmigrate.Migrate(ctx, pool, sets()...)
	require.NoError(t, err)
	require.Empty(t, second, "a second run applies nothing")
	requireSingleVersion(t, pool, all)
}

// envMigrateHelper makes the test binary, re-run as a child process, migrate
// the schema at that URL and print how many migrations it applied.
const envMigrateHelper = "DOCLOG_TEST_MIGRATE_URL"

func TestMigrateHelperProcess(t *testing.T) {
	url := os.Getenv(envMigrateHelper)
	if url == "" {
		return // only meaningful as the child of TestMigrateConcurrently
	}
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	applied, err := pgmigrate.Migrate(context.Background(), pool, sets()...)
	require.NoError(t, err)
	fmt.Printf("applied=%d\n", len(applied))
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := testenv.PostgresSchema(t)
	all := allMigrations(t)
	// Real processes: the test binary re-run as children.
	const procs = 4
	outs := make([][]byte, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMigrateHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), envMigrateHelper+"="+url)
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	total := 0
	for i := range procs {
		require.NoError(t, errs[i], "child %d: %s", i, outs[i])
		m := regexp.MustCompile(`applied=(\d+)`).FindSubmatch(outs[i])
		require.NotNil(t, m, "child %d printed no count: %s", i, outs[i])
		n, err := strconv.Atoi(string(m[1]))
		require.NoError(t, err)
		total += n
	}
	require.Equal(t, len(all), total, "each migration is applied by exactly one process")
	requireSingleVersion(t, newPool(t, url), all)
}

// Goroutines of one process, on one pool, serialize on the lock as
// processes do.
func TestMigrateConcurrentlyAndTwice(t *testing.T) {
	t.Parallel()
	pool := newPool(t, testenv.PostgresSchema(t))
	ctx := context.Background()
	var wg sync.WaitGroup
	applied := make([][]pgmigrate.Migration, 4)
	errs := make([]error, 4)
	for i := range applied {
		wg.Go(func() { applied[i], errs[i] = pgmigrate.Migrate(ctx, pool, sets()...) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	total := 0
	for _, a := range applied {
		total += len(a)
	}
	require.Equal(t, len(allMigrations(t)), total, "each migration is applied exactly once")
	again, err := pgmigrate.Migrate(ctx, pool, sets()...)
	require.NoError(t, err)
	require.Empty(t, again)
}

func requireSingleVersion(t *testing.T, pool *pgxpool.Pool, all []pgmigrate.Migration) {
	t.Helper()
	statuses, err := pgmigrate.Statuses(context.Background(), pool, sets()...)
	require.NoError(t, err)
	require.Len(t, statuses, len(all))
	for i, st := range statuses {
		require.Equal(t, all[i].Component, st.Component)
		require.Equal(t, all[i].Version, st.Version)
		require.True(t, st.Applied(), "%s migration %d applied", st.Component, st.Version)
	}
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgmigrate.Table).Scan(&n))
	require.Equal(t, len(all), n, "one row per migration")
}

func TestMigrationStatusBeforeMigrate(t *testing.T) {
	t.Parallel()
	pool := newPool(t, testenv.PostgresSchema(t))
	statuses, err := pgmigrate.Statuses(context.Background(), pool, sets()...)
	require.NoError(t, err)
	require.Len(t, statuses, len(allMigrations(t)))
	for _, st := range statuses {
		require.False(t, st.Applied())
	}
}

// A version applied by a newer binary is listed among its set's own, in
// version order, as applied, under the name it was recorded with.
func TestStatusListsUnknownVersions(t *testing.T) {
	t.Parallel()
	pool := newPool(t, testenv.PostgresSchema(t))
	ctx := context.Background()
	_, err := pgmigrate.Migrate(ctx, pool, sets()...)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO `+pgmigrate.Table+` (component, version, name) VALUES ('runner', 900, 'from_a_newer_binary'), ('gone', 1, 'of_a_removed_projector')`)
	require.NoError(t, err)
	statuses, err := pgmigrate.Statuses(ctx, pool, sets()...)
	require.NoError(t, err)
	require.Len(t, statuses, len(allMigrations(t))+1, "a component no set names is not listed")
	runner, err := pgproj.RunnerMigrations().Migrations()
	require.NoError(t, err)
	logs, err := postgres.Migrations().Migrations()
	require.NoError(t, err)
	st := statuses[len(logs)+len(runner)]
	require.Equal(t, pgmigrate.Status{Component: "runner", Version: 900, Name: "from_a_newer_binary", AppliedAt: st.AppliedAt}, st)
	require.True(t, st.Applied())
	require.Equal(t, docview.Name, statuses[len(logs)+len(runner)+1].Component)
}

// The lock is the one the earlier log migrator took: while an earlier
// binary migrates the schema, this migrator waits for it.
func TestMigrateWaitsForTheEarlierMigratorsLock(t *testing.T) {
	t.Parallel()
	pool := newPool(t, testenv.PostgresSchema(t))
	ctx := context.Background()
	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	const key = `hashtextextended('doclog.migrate:' || current_schema(), 0)`
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = pgmigrate.Migrate(short, pool, sets()...)
	require.Error(t, err, "the lock is held")
	_, err = holder.Exec(ctx, `SELECT pg_advisory_unlock(`+key+`)`)
	require.NoError(t, err)
	applied, err := pgmigrate.Migrate(ctx, pool, sets()...)
	require.NoError(t, err)
	require.Len(t, applied, len(allMigrations(t)))
}

func TestSetMigrations(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	ms, err := pgmigrate.Set{Component: "c", Dir: "m", FS: fstest.MapFS{
		"m/002_second.sql": file("SELECT 2"),
		"m/001_first.sql":  file("SELECT 1"),
		"m/README.md":      file("not a migration"),
	}}.Migrations()
	require.NoError(t, err)
	require.Equal(t, []pgmigrate.Migration{
		{Component: "c", Version: 1, Name: "first", SQL: "SELECT 1"},
		{Component: "c", Version: 2, Name: "second", SQL: "SELECT 2"},
	}, ms)
	for name, s := range map[string]pgmigrate.Set{
		"no component":   {Dir: "m", FS: fstest.MapFS{"m/001_a.sql": file("")}},
		"no version":     {Component: "c", Dir: "m", FS: fstest.MapFS{"m/first.sql": file("")}},
		"not a number":   {Component: "c", Dir: "m", FS: fstest.MapFS{"m/one_first.sql": file("")}},
		"shared version": {Component: "c", Dir: "m", FS: fstest.MapFS{"m/001_a.sql": file(""), "m/1_b.sql": file("")}},
		"no directory":   {Component: "c", Dir: "m", FS: fstest.MapFS{}},
	} {
		_, err := s.Migrations()
		require.Error(t, err, name)
	}
	_, err = pgmigrate.Migrate(context.Background(), nil, pgproj.RunnerMigrations(), pgproj.RunnerMigrations())
	require.ErrorContains(t, err, `two migration sets name the component "runner"`)
}
