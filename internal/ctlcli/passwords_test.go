package ctlcli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// No command prints a password it was given in a URL — in its output, its
// error or its log — whether the server is down, refuses the URL, or takes
// it (the test database trusts its clients, so a planted password does not
// stop the command before the line that would print it).
func TestPasswordsStayHidden(t *testing.T) {
	t.Parallel()
	const planted = "PLANTED-SECRET-123"
	bin := filepath.Join(t.TempDir(), "doclogctl")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/doclogctl")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	dead := "postgres://doclog:" + planted + "@" + testenv.UnusedAddr(t) + "/doclog?sslmode=disable"
	live := migrated(t)
	pg, err := pgconn.ParseConfig(testenv.PostgresURL(t))
	require.NoError(t, err)
	liveKeywords := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable password=%s search_path=public",
		pg.Host, pg.Port, pg.User, pg.Database, planted)

	for _, c := range []struct {
		args []string
		want string // in what the command printed, so it got as far as the case means
	}{
		{[]string{"migrate", "status", "--database-url", dead}, "connection refused"},
		{[]string{"docs", "get", "0193a000-0000-7000-8000-000000000001", "--database-url", dead}, "connection refused"},
		{[]string{"jobs", "get", "0193a000-0000-7000-8000-000000000001", "--database-url", dead}, "connection refused"},
		{[]string{"status", "--database-url", dead, "--kafka-seeds", testenv.UnusedAddr(t), "--timeout", "10s"}, "connection refused"},
		{[]string{"verify", "--database-url", live, "--clickhouse-url", "clickhouse://default:" + planted + "@127.0.0.1:notaport/db"}, "invalid port"},
		{[]string{"verify", "--database-url", live, "--clickhouse-url", "clickhouse://default:" + planted + "@" + testenv.UnusedAddr(t) + "/db"}, "connection refused"},
		{[]string{"bench", "--embedded", "--database-url", liveKeywords, "--kafka-seeds", testenv.KafkaSeeds(t)[0]}, "password=xxxxx"},
		{[]string{"bench", "--ingest-url", "http://doclog:" + planted + "@" + testenv.UnusedAddr(t), "--database-url", dead, "--log-level", "debug"}, "connection refused"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Env = append(os.Environ(), "DOCLOG_DATABASE_URL=", "DATABASE_URL=", "CLICKHOUSE_URL=")
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%v: %s", c.args, out)
		require.Contains(t, string(out), c.want, "%v", c.args)
		require.NotContains(t, string(out), planted, "%v", c.args)
	}
}
