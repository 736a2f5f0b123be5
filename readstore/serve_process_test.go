package readstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/servicecli"
)

// serveProcessEnv names the variable that makes the test binary run
// `doclog serve` with the arguments it holds (JSON), through the same
// command tree as the doclog binary.
const serveProcessEnv = "READSTORE_TEST_SERVE_ARGS"

func runServeProcess(raw string) int {
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, "serve process: arguments:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := servicecli.NewRootCmd(os.Stderr)
	cmd.SetArgs(append([]string{"serve"}, args...))
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "serve process:", err)
		return 1
	}
	return 0
}

// startServeProcess runs `doclog serve` with args as a process of its own,
// killed at the latest when the test ends.
func startServeProcess(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveProcessEnv+"="+string(raw))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// Dies with the test binary, should the test be killed itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { kill(cmd) })
	return cmd
}

// kill ends the process with SIGKILL, as a crash would, and reaps it.
func kill(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}
