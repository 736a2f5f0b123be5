package analytics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/projectors/analytics"
)

// TestSchemaIdempotent creates the schema on the test server (ClickHouse
// 18.16) twice, through New and EnsureSchema, and checks the engines.
func TestSchemaIdempotent(t *testing.T) {
	t.Parallel()
	p := newProjector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, analytics.EnsureSchema(ctx, p.Conn(), p.Database(), false))
	for table, engine := range map[string]string{
		analytics.TableOperations: "ReplacingMergeTree(ordinal)",
		analytics.TableDocuments:  "ReplacingMergeTree(operation_count)",
	} {
		rows := query(t, p, "SHOW CREATE TABLE "+p.Database()+"."+table)
		require.Len(t, rows, 1)
		require.Contains(t, rows[0][0], engine, table)
	}
	// A second projector over the same database finds the tables in place.
	again, err := analytics.New(ctx, analytics.Config{Addr: []string{testenv.ClickHouseAddr(t)}, Database: p.Database(), Name: "again"}, nil)
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

// TestCreateDatabase checks CreateDatabase, and that without it a missing
// database is reported rather than created.
func TestCreateDatabase(t *testing.T) {
	t.Parallel()
	addr := testenv.ClickHouseAddr(t)
	db := testenv.UniqueName(t, "t_")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := analytics.New(ctx, analytics.Config{Addr: []string{addr}, Database: db}, nil)
	require.Error(t, err)

	p, err := analytics.New(ctx, analytics.Config{Addr: []string{addr}, Database: db, CreateDatabase: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, p.Conn().Exec(ctx, "DROP DATABASE IF EXISTS "+db))
		require.NoError(t, p.Close())
	})
	require.Equal(t, uint64(2), scalar(t, p, "SELECT count() FROM system.tables WHERE database = ?", db))
}

// TestSchemaError reports a refused statement as *SchemaError.
func TestSchemaError(t *testing.T) {
	t.Parallel()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{testenv.ClickHouseAddr(t)}})
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = analytics.EnsureSchema(ctx, conn, "no_such_database_here", false)
	var se *analytics.SchemaError
	require.True(t, errors.As(err, &se), "got %v", err)
	require.True(t, strings.HasPrefix(se.Object, "table no_such_database_here."), se.Object)
}

// TestStatementsAvoidNewSyntax guards the 18.16 floor against constructs it
// rejects, in case a later edit adds one.
func TestStatementsAvoidNewSyntax(t *testing.T) {
	t.Parallel()
	for _, stmt := range analytics.Statements("db") {
		for _, banned := range []string{"LowCardinality", "DateTime64", "Nullable", "DEFAULT", "CODEC", "TTL", "SETTINGS", "PARTITION BY"} {
			require.NotContains(t, stmt, banned)
		}
		require.True(t, strings.HasPrefix(stmt, "CREATE TABLE IF NOT EXISTS db."), stmt)
	}
}
