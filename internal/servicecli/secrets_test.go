package servicecli

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// `doclog migrate`, which the chart's hook runs, reads the database URL from
// the file DOCLOG_DATABASE_URL_FILE names, and refuses it given twice.
func TestMigrateReadsDatabaseURLFile(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	urlFile := filepath.Join(t.TempDir(), "database-url")
	testenv.WriteFile(t, urlFile, []byte(testenv.PostgresSchema(t)+"\n"))

	cmd := exec.Command(bin, "migrate")
	cmd.Env = append(serveEnv(), "DOCLOG_DATABASE_URL_FILE="+urlFile)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, runBounded(t, cmd), out.String())
	require.Contains(t, out.String(), "applied ")

	cmd = exec.Command(bin, "migrate", "--database-url", "postgres://doclog@127.0.0.1:9/doclog")
	cmd.Env = append(serveEnv(), "DOCLOG_DATABASE_URL_FILE="+urlFile)
	out.Reset()
	cmd.Stdout, cmd.Stderr = &out, &out
	require.Error(t, runBounded(t, cmd))
	require.Contains(t, out.String(), "--database-url and DOCLOG_DATABASE_URL_FILE are both given")
}

// runBounded runs cmd, killing it after a minute.
func runBounded(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("%v ran for more than a minute", cmd.Args)
		return nil
	}
}
