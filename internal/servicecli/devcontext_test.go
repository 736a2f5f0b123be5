package servicecli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/testenv"
)

// doclog dev writes a doclogctl context named dev with its addresses, the
// Postgres password included, into the user's config file (0600), keeps the
// file's other contexts, and makes dev current when no context is; doclogctl
// then reaches the instance with no flag.
func TestDevWritesItsContext(t *testing.T) {
	bin := buildDoclog(t)
	ctlBin := filepath.Join(t.TempDir(), "doclogctl")
	build := exec.Command("go", "build", "-o", ctlBin, "../../cmd/doclogctl")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	home := t.TempDir()
	path := filepath.Join(home, "doclog", "config.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	testenv.WriteFile(t, path, []byte("# mine\ncontexts:\n  - name: prod\n    kafka-seeds: [kafka:9093]\n"))
	env := []string{"XDG_CONFIG_HOME=" + home}

	parent := t.TempDir()
	require.NoError(t, os.Chmod(parent, 0o700))
	d := startDev(t, bin, env, "--data-dir", filepath.Join(parent, "data"),
		"--ingest-addr", "127.0.0.1:0", "--readstore-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0")
	pwFile := regexp.MustCompile(`\(password in (.+)\)`).FindStringSubmatch(d.banner)
	require.NotNil(t, pwFile, d.banner)
	t.Cleanup(func() {
		_ = d.stop()
		_ = os.RemoveAll(filepath.Dir(pwFile[1]))
	})
	require.Contains(t, d.banner, `doclogctl context "dev" written to `+path+`, the current one`)

	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the file holds a password")
	f, err := config.ReadFile(path, false)
	require.NoError(t, err)
	require.Equal(t, "dev", f.CurrentContext)
	_, kept := f.Context("prod")
	require.True(t, kept, "the other contexts are kept")
	dev, ok := f.Context("dev")
	require.True(t, ok)
	pw, err := os.ReadFile(pwFile[1])
	require.NoError(t, err)
	require.Contains(t, dev.Settings["database-url"], ":"+strings.TrimSpace(string(pw))+"@127.0.0.1:", "the URL carries the password")
	urls := d.urls(t)
	require.Equal(t, urls["ingest"], dev.Settings["ingest-url"])
	require.Equal(t, urls["readstore"], dev.Settings["readstore-url"])
	require.Regexp(t, `^127\.0\.0\.1:\d+`, dev.Settings["kafka-seeds"])

	// doclogctl finds it with no flag and no variable.
	ctl := func(args ...string) (string, error) {
		c := exec.Command(ctlBin, args...)
		c.Env = append(serveEnv(), env...)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	out, err := ctl("status")
	require.NoError(t, err, out)
	m := regexp.MustCompile(`migrations (\d+)/(\d+)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, m[2], m[1], "the dev instance's Postgres, migrated")
	require.Contains(t, out, "doclog-executor", "and its Kafka, where the executor group is")
	out, err = ctl("context", "show")
	require.NoError(t, err, out)
	require.Contains(t, out, `context "dev" (current)`)
	require.NotContains(t, out, strings.TrimSpace(string(pw)), "show masks the password")
	d.requireStops(t)

	// Stopped, its ports are gone: the error names the context and what
	// to change.
	out, err = ctl("topics", "describe")
	require.Error(t, err)
	require.Contains(t, out, `cannot reach Kafka at `+dev.Settings["kafka-seeds"]+` (context "dev"): set --kafka-seeds or DOCLOG_KAFKA_SEEDS, or update the context`)
}
