package localpg_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/doclog/doclog/internal/localpg"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reachable makes every directory from the test's temp root down to dir
// traversable, so the postgres user can reach a cluster created by root.
func reachable(t *testing.T, dir string) {
	root := filepath.Dir(filepath.Dir(dir))
	for d := dir; len(d) >= len(root); d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
}

func TestStartStopRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pg")
	require.NoError(t, os.Mkdir(dir, 0o755))
	reachable(t, dir)
	ctx := context.Background()

	srv, err := localpg.Start(ctx, localpg.Config{DataDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	conn, err := pgx.Connect(ctx, srv.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, srv.Stop(ctx))
	require.NoError(t, srv.Stop(ctx), "stopping twice is harmless")

	// A second start reuses the cluster and its data.
	srv2, err := localpg.Start(ctx, localpg.Config{DataDir: dir})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv2.Stop(ctx)) }()
	conn, err = pgx.Connect(ctx, srv2.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v int
	require.NoError(t, conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v))
	require.Equal(t, 42, v)
}

func TestConfigValidate(t *testing.T) {
	require.ErrorContains(t, localpg.Config{}.Validate(), "data directory is required")
	require.ErrorContains(t, localpg.Config{DataDir: "x", Port: 70000}.Validate(), "out of range")
	_, err := localpg.Start(context.Background(), localpg.Config{DataDir: t.TempDir(), BinDir: "/nonexistent"})
	require.Error(t, err)
}
