package localpg_test

import (
	"context"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/doclog/doclog/internal/localpg"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start starts a cluster in dir and removes it, wherever it lives, when the
// test ends.
func start(t *testing.T, dir string) *localpg.Server {
	t.Helper()
	srv, err := localpg.Start(context.Background(), localpg.Config{DataDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = srv.Stop(context.Background())
		_ = os.RemoveAll(srv.Dir())
	})
	return srv
}

// The cluster survives a restart, authenticates with the password in its
// private file (a URL without it is refused), and the directories above
// the data directory keep their modes even when they shut the postgres
// user out.
func TestStartStopRestart(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	require.NoError(t, os.Chmod(parent, 0o700))
	dir := filepath.Join(parent, "pg")
	ctx := context.Background()

	srv := start(t, dir)
	conn, err := pgx.Connect(ctx, srv.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	u, err := url.Parse(srv.URL())
	require.NoError(t, err)
	pw, ok := u.User.Password()
	require.True(t, ok, "the URL carries the password")
	require.GreaterOrEqual(t, len(pw), 32)
	u.User = url.User("postgres")
	_, err = pgx.Connect(ctx, u.String())
	require.ErrorContains(t, err, "password", "the cluster must not trust a client without the password")
	u.User = url.UserPassword("postgres", "not-"+pw)
	_, err = pgx.Connect(ctx, u.String())
	require.ErrorContains(t, err, "password authentication failed")

	b, err := os.ReadFile(srv.PasswordFile())
	require.NoError(t, err)
	require.Contains(t, string(b), pw)
	requirePrivate(t, srv.PasswordFile(), 0o600)
	requirePrivate(t, dir, 0o700)
	requirePrivate(t, srv.LogFile(), 0o600)
	fi, err := os.Stat(parent)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "a parent of the data directory changed mode")

	require.NoError(t, srv.Stop(ctx))
	require.NoError(t, srv.Stop(ctx), "stopping twice is harmless")

	// A second start reuses the cluster, its data and its password.
	srv2, err := localpg.Start(ctx, localpg.Config{DataDir: dir})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv2.Stop(ctx)) }()
	require.Equal(t, srv.Dir(), srv2.Dir())
	conn, err = pgx.Connect(ctx, srv2.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v int
	require.NoError(t, conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v))
	require.Equal(t, 42, v)
}

// A data directory whose name a shell would split or expand works as
// named, and nothing in its name runs.
func TestPathsReachNoShell(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work) // where a command substitution would leave its file
	dir := filepath.Join(work, "with space $(touch PWNED) `touch PWNED` it's \"quoted\"")
	srv := start(t, dir)
	conn, err := pgx.Connect(context.Background(), srv.URL())
	require.NoError(t, err)
	require.NoError(t, conn.Close(context.Background()))
	_, err = os.Stat(filepath.Join(dir, "server.log"))
	require.NoError(t, err, "the log is in the directory as named")
	for _, root := range []string{work, srv.Dir(), filepath.Dir(srv.Dir())} {
		require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			require.NotEqual(t, "PWNED", d.Name(), "a command in the directory's name ran: %s", path)
			return nil
		}))
	}
}

// A data directory someone else could have planted or can enter is
// refused, and nothing it points to changes owner or mode.
func TestRefusesDirectoriesOthersControl(t *testing.T) {
	t.Parallel()
	base := t.TempDir()

	target := filepath.Join(base, "target")
	require.NoError(t, os.Mkdir(target, 0o755))
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(target, link))
	_, err := localpg.Start(context.Background(), localpg.Config{DataDir: link})
	require.ErrorContains(t, err, "symbolic link")
	fi, err := os.Stat(target)
	require.NoError(t, err)
	require.Equal(t, uint32(os.Geteuid()), fi.Sys().(*syscall.Stat_t).Uid, "the link's target changed owner")
	require.Equal(t, fs.FileMode(0o755), fi.Mode().Perm(), "the link's target changed mode")
	entries, err := os.ReadDir(target)
	require.NoError(t, err)
	require.Empty(t, entries, "something was written through the link")

	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	_, err = localpg.Start(context.Background(), localpg.Config{DataDir: open})
	require.ErrorContains(t, err, "chmod 700 "+open)

	// Someone else's directory: one made and given away when this is root,
	// the root directory otherwise.
	theirs := "/"
	if os.Geteuid() == 0 {
		theirs = filepath.Join(base, "theirs")
		require.NoError(t, os.Mkdir(theirs, 0o700))
		require.NoError(t, os.Chown(theirs, 65534, 65534))
	}
	err = localpg.PrivateDir(theirs)
	require.ErrorContains(t, err, "belongs to uid")

	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.ErrorContains(t, localpg.PrivateDir(file), "not a directory")

	fresh := filepath.Join(base, "a", "b")
	require.NoError(t, localpg.PrivateDir(fresh))
	requirePrivate(t, fresh, 0o700)
	requirePrivate(t, filepath.Dir(fresh), 0o700)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, localpg.Config{}.Validate(), "data directory is required")
	require.ErrorContains(t, localpg.Config{DataDir: "x", Port: 70000}.Validate(), "out of range")
	require.ErrorContains(t, localpg.Config{DataDir: "x", BinDir: "/opt/$(id)/bin"}.Validate(), "shell would interpret")
	_, err := localpg.Start(context.Background(), localpg.Config{DataDir: t.TempDir(), BinDir: "/nonexistent"})
	require.Error(t, err)
}

// requirePrivate requires path to have exactly mode perm and to belong to
// this user or, for the cluster's files when this is root, to postgres.
func requirePrivate(t *testing.T, path string, perm fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	require.Equal(t, perm, fi.Mode().Perm(), "mode of %s", path)
	uid := fi.Sys().(*syscall.Stat_t).Uid
	require.Contains(t, []string{strconv.Itoa(os.Geteuid()), postgresUID(t)}, strconv.Itoa(int(uid)), "owner of %s", path)
}

func postgresUID(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return strconv.Itoa(os.Geteuid())
	}
	u, err := user.Lookup("postgres")
	require.NoError(t, err)
	return u.Uid
}
