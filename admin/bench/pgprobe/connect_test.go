package pgprobe_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin/bench/pgprobe"
	"github.com/doclog/doclog/internal/testenv"
)

// The bench's own connections keep to the connect timeout doclogctl was
// given: a Postgres that accepts and never answers is given up on after it,
// and the error names the flag.
func TestSchemaConnectionsKeepTheConnectTimeout(t *testing.T) {
	t.Parallel()
	url := "postgres://doclog:x@" + testenv.SilentListener(t) + "/doclog?sslmode=disable"
	start := time.Now()
	err := pgprobe.CreateSchema(context.Background(), url, 500*time.Millisecond, "bench_x")
	require.Error(t, err)
	require.Contains(t, err.Error(), "--database-connect-timeout")
	require.Less(t, time.Since(start), 30*time.Second)
}
