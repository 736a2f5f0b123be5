package servicecli

import (
	"bytes"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// `doclog serve` that cannot bind an address exits 1 and names the flag
// that chose it, for the ops, ingest and readstore addresses, with the real
// Postgres and Kafka behind the roles.
func TestServeNamesTheFlagOfAPortInUse(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	kenv := testenv.Kafka(t)
	seeds := strings.Join(testenv.KafkaSeeds(t), ",")
	for _, c := range []struct {
		flag  string
		extra []string
	}{
		{"--ops-addr", []string{"--roles", "readstore", "--readstore-addr", "127.0.0.1:0"}},
		{"--ingest-addr", []string{"--roles", "ingest", "--ops-addr", "127.0.0.1:0"}},
		{"--readstore-addr", []string{"--roles", "readstore", "--ops-addr", "127.0.0.1:0"}},
		{"--http-addr", []string{"--roles", "readstore", "--ops-addr", "127.0.0.1:0"}},
	} {
		t.Run(strings.TrimPrefix(c.flag, "--"), func(t *testing.T) {
			t.Parallel()
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer taken.Close()
			addr := taken.Addr().String()
			args := append([]string{"serve", c.flag, addr, "--migrate=auto", "--database-url", testenv.PostgresSchema(t),
				"--kafka-seeds", seeds, "--topics-prefix", kenv.Topics.Prefix, "--topics-jobs-partitions", "2"}, c.extra...)
			code, stderr := runToExit(t, exec.Command(bin, args...), 2*time.Minute)
			require.Equal(t, 1, code, stderr)
			require.Contains(t, stderr, "listen on "+addr+" ("+c.flag+"): address already in use", stderr)
		})
	}
}

// runToExit runs cmd, a doclog serve meant to fail, in the serve
// environment and returns its exit status and stderr; it fails the test if
// cmd still runs after within.
func runToExit(t *testing.T, cmd *exec.Cmd, within time.Duration) (code int, stderr string) {
	t.Helper()
	cmd.Env = serveEnv()
	var buf bytes.Buffer
	cmd.Stderr = &buf
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v: %s", cmd.Args, buf.String())
		return exit.ExitCode(), buf.String()
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("%v kept running for %s: %s", cmd.Args, within, buf.String())
		return 0, ""
	}
}
