package main

import (
	"bytes"
	"context"
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
