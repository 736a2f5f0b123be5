package admin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/log/postgres"
)

// Every table that keeps whole states compresses them with lz4, so a large
// document costs the server a fraction of pglz's CPU per write; a state
// written there is stored so, and reads back as written.
func TestLargeStatesAreStoredWithLZ4(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := postgres.Open(ctx, testenv.PostgresSchema(t))
	require.NoError(t, err)
	t.Cleanup(store.Close)
	_, err = admin.MigrateAll(ctx, store)
	require.NoError(t, err)
	pool := store.Pool()

	for _, table := range []string{"keyframes", "document_snapshots", "projector_streams"} {
		var method string
		require.NoError(t, pool.QueryRow(ctx, `SELECT attcompression::text FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'state'`, table).Scan(&method))
		require.Equal(t, "l", method, "%s.state's compression", table)
	}

	// A state of 300 KB, in the shape of a document's records, is
	// compressed (stored smaller than it is) and with lz4.
	var b strings.Builder
	b.WriteString(`{`)
	for i := range 4000 {
		if i > 0 {
			b.WriteString(`,`)
		}
		fmt.Fprintf(&b, `"item-%06d":{"n":%d,"title":"a record of moderate length"}`, i, i)
	}
	b.WriteString(`}`)
	state := b.String()
	_, err = pool.Exec(ctx, `INSERT INTO keyframes (document_id, scope, branch, idx, document_type, model_version, state, hash)
VALUES ('d', 'global', 'main', 0, 'doclog/json', 1, $1::json, 'h')`, state)
	require.NoError(t, err)
	var (
		method        string
		stored, whole int
		back          string
	)
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_column_compression(state), pg_column_size(state), octet_length(state::text), state::text
FROM keyframes WHERE document_id = 'd'`).Scan(&method, &stored, &whole, &back))
	require.Equal(t, "lz4", method)
	require.Less(t, stored, whole/2, "stored size against the text's")
	require.Equal(t, state, back)
}
