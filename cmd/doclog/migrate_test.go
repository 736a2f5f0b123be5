package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

func TestMigrateCommand(t *testing.T) {
	url := testenv.PostgresSchema(t)
	run := func(args ...string) string {
		var out bytes.Buffer
		cmd := newRootCmd(&out)
		cmd.SetArgs(append(args, "--database-url", url))
		require.NoError(t, cmd.ExecuteContext(context.Background()))
		return out.String()
	}
	before := run("migrate", "status")
	require.Regexp(t, `001\s+operation_log\s+pending`, before)

	first := run("migrate")
	require.Regexp(t, `applied [1-9]\d* migration\(s\)`, first)
	require.NotContains(t, first, "pending")

	require.Contains(t, run("migrate"), "applied 0 migration(s)")
}

func TestMigrateNeedsDatabase(t *testing.T) {
	t.Setenv("DOCLOG_DATABASE_URL", "")
	t.Setenv("DATABASE_URL", "")
	cmd := newRootCmd(&bytes.Buffer{})
	cmd.SetArgs([]string{"migrate"})
	err := cmd.ExecuteContext(context.Background())
	require.ErrorContains(t, err, "no database")
}
