package servicecli

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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
	m := regexp.MustCompile(`applied (\d+) migration\(s\)\nmigrations (\d+)/(\d+) applied\n`).FindStringSubmatch(first)
	require.NotNil(t, m, first)
	require.Equal(t, []string{m[1], m[1]}, m[2:], "a fresh schema: every migration listed was applied now")
	require.Greater(t, strings.Count(first, "\n")-3, 1, "the log's and the projectors' migrations are listed: %s", first)
	require.Equal(t, mustAtoi(t, m[1]), strings.Count(first, "\n")-3, "one row per migration counted: %s", first)
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

// Start-up counts the migrations as migrate status does: `doclog serve
// --migrate=auto` on a fresh schema logs that it applied every migration
// status lists, in the same words.
func TestServeCountsMigrationsAsStatusDoes(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	url := testenv.PostgresSchema(t)
	p := startServe(t, bin, "--migrate=auto", "--database-url", url, "--kafka-seeds", strings.Join(testenv.KafkaSeeds(t), ","),
		"--roles", "readstore", "--readstore-addr", "127.0.0.1:0")
	logged := p.awaitLog(t, "schema migrated", time.Minute)
	p.requireStops(t, time.Minute)

	var out bytes.Buffer
	cmd := newRootCmd(&out)
	cmd.SetArgs([]string{"migrate", "status", "--database-url", url})
	require.NoError(t, cmd.ExecuteContext(context.Background()))
	m := regexp.MustCompile(`^migrations (\d+)/(\d+) applied\n`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	require.Equal(t, m[1], m[2])
	require.Equal(t, m[1]+"/"+m[2]+" applied", logged["migrations"])
	require.EqualValues(t, mustAtoi(t, m[1]), logged["applied_now"])
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// doclog migrate reads serve's config file: its database-url is used, the
// keys only serve uses are let through, a flag wins over the file, and a key
// serve does not know either is refused by name.
func TestMigrateReadsTheConfigFile(t *testing.T) {
	url := testenv.PostgresSchema(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := newRootCmd(&out)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	for _, v := range []string{"DATABASE_URL", "DOCLOG_DATABASE_URL", "DOCLOG_DATABASE_URL_FILE", "DOCLOG_CONFIG"} {
		t.Setenv(v, "") // restored after the test
		require.NoError(t, os.Unsetenv(v))
	}

	good := write("good.yaml", "database-url: "+strconv.Quote(url)+"\nkafka-seeds: [127.0.0.1:1]\nexecutor-job-timeout: 1m\n")
	out, err := run("migrate", "--config", good)
	require.NoError(t, err)
	require.Regexp(t, `applied \d+ migration\(s\)`, out)

	t.Setenv("DOCLOG_CONFIG", good)
	out, err = run("migrate", "status")
	require.NoError(t, err, "DOCLOG_CONFIG names the file too")
	require.NotContains(t, out, "pending")

	// The flag wins: an unreachable URL in the file is never dialled.
	t.Setenv("DOCLOG_CONFIG", write("unreachable.yaml", "database-url: postgres://u@"+testenv.UnusedAddr(t)+"/x\n"))
	_, err = run("migrate", "status", "--database-url", url)
	require.NoError(t, err)

	require.NoError(t, os.Unsetenv("DOCLOG_CONFIG"))
	_, err = run("migrate", "--config", write("bad.yaml", "database-url: "+strconv.Quote(url)+"\ndatabse-url: x\n"))
	require.ErrorContains(t, err, `unknown setting "databse-url"`)
}

// doclog migrate takes --database-connect-timeout, as serve and doclogctl
// do: a Postgres that accepts and never answers is given up on after it,
// and the error names the flag.
func TestMigrateConnectTimeout(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	cmd := newRootCmd(&out)
	cmd.SetArgs([]string{"migrate", "--database-url", "postgres://doclog:x@" + testenv.SilentListener(t) + "/doclog?sslmode=disable",
		"--database-connect-timeout", "700ms"})
	start := time.Now()
	err := cmd.ExecuteContext(context.Background())
	require.Error(t, err)
	require.Contains(t, err.Error(), "--database-connect-timeout")
	require.Less(t, time.Since(start), 30*time.Second, "the timeout, not the command's own bound, ended the attempt")
}
