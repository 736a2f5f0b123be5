package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/log/postgres"
)

// Migrate alone applies the log's set, under its component, through the one
// migrator (whose own tests are pgmigrate's).
func TestMigrateTheLogAlone(t *testing.T) {
	t.Parallel()
	pool := newPool(t, false)
	ctx := context.Background()
	all, err := postgres.Migrations().Migrations()
	require.NoError(t, err)
	first, err := postgres.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Len(t, first, len(all))
	for i, m := range all {
		require.Equal(t, m.Version, first[i])
	}
	second, err := postgres.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, second, "a second run applies nothing")
	statuses, err := postgres.MigrationStatuses(ctx, pool)
	require.NoError(t, err)
	require.Len(t, statuses, len(all))
	for _, st := range statuses {
		require.Equal(t, postgres.Component, st.Component)
		require.True(t, st.Applied(), "migration %d applied", st.Version)
	}
}
