package servicecli

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/localpg"
	"github.com/doclog/doclog/internal/testenv"
)

// planted is the password the tests give doclog and look for in all it
// prints.
const planted = "PLANTED-SECRET-123"

// `doclog dev` listens on loopback unless told otherwise: --address moves
// every port not given its own flag, and an explicit address wins.
func TestDevListensOnLoopbackByDefault(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want map[string]string
		err  string
	}{
		{nil, map[string]string{"ingest-addr": "127.0.0.1:8080", "readstore-addr": "127.0.0.1:8081", "ops-addr": "127.0.0.1:9090"}, ""},
		{[]string{"--address", "0.0.0.0"}, map[string]string{"ingest-addr": "0.0.0.0:8080", "readstore-addr": "0.0.0.0:8081", "ops-addr": "0.0.0.0:9090"}, ""},
		{[]string{"--address", "::", "--ops-addr", "127.0.0.1:9999"}, map[string]string{"ingest-addr": "[::]:8080", "readstore-addr": "[::]:8081", "ops-addr": "127.0.0.1:9999"}, ""},
		{[]string{"--ingest-addr", ":8088"}, map[string]string{"ingest-addr": ":8088", "readstore-addr": "127.0.0.1:8081"}, ""},
		{[]string{"--address", "0.0.0.0:8080"}, nil, "--address takes a host"},
	} {
		cmd := newDevCmd(&bytes.Buffer{})
		require.NoError(t, cmd.ParseFlags(c.args))
		err := listenOn(cmd.Flags(), cmd.Flags().Lookup("address").Value.String())
		if c.err != "" {
			require.ErrorContains(t, err, c.err)
			continue
		}
		require.NoError(t, err)
		for flag, want := range c.want {
			require.Equal(t, want, cmd.Flags().Lookup(flag).Value.String(), "%v: --%s", c.args, flag)
		}
	}
}

// Listening beyond loopback without bearer tokens is said loudly, in the
// banner and in the log at warn level; with a token it is not, and the
// banner says which ports listen where.
func TestDevWarnsWhenOpenWithoutAuth(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	open := []string{"--ingest-addr", "0.0.0.0:0", "--readstore-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0"}

	d := startDev(t, bin, []string{"DATABASE_URL=" + testenv.PostgresSchema(t)}, append([]string{"--data-dir", filepath.Join(t.TempDir(), "d")}, open...)...)
	require.Contains(t, d.banner, "WARNING: authentication is off and the ingest API listens beyond loopback")
	require.Regexp(t, `ingest\s+http://127\.0\.0\.1:\d+\s+\[listening on every interface: (0\.0\.0\.0|\[::\]):\d+\]`, d.banner)
	require.Regexp(t, `Listening beyond loopback: ingest (0\.0\.0\.0|\[::\]):\d+\.`, d.banner)
	require.NotContains(t, d.banner, "Every port listens on loopback only")
	d.requireStops(t)
	require.Regexp(t, `(?m)^\S+\twarn\t.*the APIs listen beyond loopback with authentication off`, d.output())

	token := strings.Repeat("t", 40)
	d = startDev(t, bin, []string{"DATABASE_URL=" + testenv.PostgresSchema(t)}, append([]string{"--data-dir", filepath.Join(t.TempDir(), "d"), "--auth-tokens", token}, open...)...)
	require.Contains(t, d.banner, "Authentication is on")
	require.Regexp(t, `Listening beyond loopback: ingest (0\.0\.0\.0|\[::\]):\d+\.`, d.banner)
	d.requireStops(t)
	require.NotContains(t, d.banner, "WARNING")
	require.NotContains(t, d.output(), "with authentication off")
}

// No password given to `doclog dev` shows in what it prints or logs: not
// in the banner once the database answers, not while it waits for one that
// does not, not in a configuration error.
func TestDevHidesPasswords(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	loopback := []string{"--ingest-addr", "127.0.0.1:0", "--readstore-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0"}
	dataDir := func() string { return filepath.Join(t.TempDir(), "d") }

	d := startDev(t, bin, []string{"DATABASE_URL=" + plantedPostgres(t)}, append([]string{"--data-dir", dataDir()}, loopback...)...)
	require.Regexp(t, `postgres\s+postgres://postgres:xxxxx@127\.0\.0\.1:\d+/postgres`, d.banner)
	d.requireStops(t)
	require.NotContains(t, d.output(), planted)

	// Postgres down: dev waits and logs why, until SIGTERM.
	dead := "postgres://doclog:" + planted + "@" + testenv.UnusedAddr(t) + "/doclog?sslmode=disable"
	cmd := exec.Command(bin, append([]string{"dev", "--data-dir", dataDir(), "--log-level", "debug"}, loopback...)...)
	cmd.Env = append(serveEnv(), "DATABASE_URL="+dead)
	out := runFor(t, cmd, 5*time.Second)
	require.Contains(t, out, "waiting for dependency")
	require.NotContains(t, out, planted)

	for _, env := range [][]string{
		{"DATABASE_URL=" + dead, "CLICKHOUSE_URL=clickhouse://default:" + planted + "@127.0.0.1:notaport/db"},
		{"DATABASE_URL=postgres://doclog:" + planted + "@127.0.0.1:99999999/doclog"},
		{"DATABASE_URL=host=127.0.0.1 port=notaport user=doclog password=" + planted},
	} {
		cmd := exec.Command(bin, append([]string{"dev", "--data-dir", dataDir()}, loopback...)...)
		cmd.Env = append(serveEnv(), env...)
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%v: %s", env, out)
		require.Contains(t, string(out), "invalid port")
		require.NotContains(t, string(out), planted)
	}
}

// Nor does `doclog serve`, waiting for Postgres, Kafka and ClickHouse that
// are not there, or refusing a URL it cannot parse.
func TestServeHidesPasswords(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	p := startServe(t, bin, "--log-level", "debug",
		"--database-url", "postgres://doclog:"+planted+"@"+testenv.UnusedAddr(t)+"/doclog?sslmode=disable",
		"--clickhouse-url", "clickhouse://default:"+planted+"@"+testenv.UnusedAddr(t)+"/doclog",
		"--kafka-seeds", testenv.UnusedAddr(t), "--ingest-addr", "127.0.0.1:0", "--readstore-addr", "127.0.0.1:0")
	p.awaitReadyz(t, 503, time.Minute, "waiting for postgres", "waiting for clickhouse")
	body := p.get(t, "/readyz").body
	p.requireStops(t, 30*time.Second)
	require.Contains(t, p.output(), "waiting for dependency")
	require.NotContains(t, p.output(), planted)
	require.NotContains(t, body, planted)

	for _, args := range [][]string{
		{"--database-url", "postgres://doclog@127.0.0.1:9/doclog", "--clickhouse-url", "clickhouse://default:" + planted + "@127.0.0.1:notaport/db"},
		{"--database-url", "postgres://doclog:" + planted + "@127.0.0.1:99999999/doclog"},
		{"--database-url", "host=127.0.0.1 port=notaport user=doclog password=" + planted},
	} {
		cmd := exec.Command(bin, append([]string{"serve", "--ops-addr", "127.0.0.1:0", "--kafka-seeds", "127.0.0.1:9"}, args...)...)
		cmd.Env = serveEnv()
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%v: %s", args, out)
		require.Contains(t, string(out), "invalid port")
		require.NotContains(t, string(out), planted)
	}
}

// plantedPostgres starts a local Postgres whose superuser's password is the
// planted one, and returns its URL with that password.
func plantedPostgres(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	srv, err := localpg.Start(ctx, localpg.Config{DataDir: filepath.Join(t.TempDir(), "pg")})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = srv.Stop(context.Background())
		_ = os.RemoveAll(srv.Dir())
	})
	conn, err := pgx.Connect(ctx, srv.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "ALTER ROLE postgres PASSWORD '"+planted+"'")
	require.NoError(t, err)
	u, err := url.Parse(srv.URL())
	require.NoError(t, err)
	u.User = url.UserPassword("postgres", planted)
	return u.String()
}

// runFor runs cmd for d, stops it with SIGTERM, and returns all it printed.
func runFor(t *testing.T, cmd *exec.Cmd, d time.Duration) string {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("%s exited early (%v):\n%s", cmd.Path, err, out.String())
	case <-time.After(d):
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("%s did not stop within 30s of SIGINT:\n%s", cmd.Path, out.String())
	}
	return out.String()
}
