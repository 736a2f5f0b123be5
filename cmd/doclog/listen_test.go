package main

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
			cmd := exec.Command(bin, args...)
			cmd.Env = serveEnv()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, "%v: %s", args, stderr.String())
				require.Equal(t, 1, exit.ExitCode())
				require.Contains(t, stderr.String(), "listen on "+addr+" ("+c.flag+"): address already in use", stderr.String())
			case <-time.After(2 * time.Minute):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("doclog serve %s %s kept running with its port taken: %s", c.flag, addr, stderr.String())
			}
		})
	}
}
