package ctlcli

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// The database URL can come from the file DOCLOG_DATABASE_URL_FILE names,
// as in the chart's pods; given twice it is a usage error.
func TestDatabaseURLFromFile(t *testing.T) {
	urlFile := filepath.Join(t.TempDir(), "database-url")
	testenv.WriteFile(t, urlFile, []byte(testenv.PostgresSchema(t)+"\n"))
	t.Setenv("DOCLOG_DATABASE_URL", "")
	t.Setenv("DATABASE_URL", "")
	t.Setenv("DOCLOG_DATABASE_URL_FILE", urlFile)
	code, out, errOut := ctl(t, "migrate", "status")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "pending")

	code, _, errOut = ctl(t, "migrate", "status", "--database-url", "postgres://doclog@127.0.0.1:9/doclog")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--database-url and DOCLOG_DATABASE_URL_FILE are both given")
}
