package buildinfo_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/buildinfo"
)

// Both commands, built with go build in this git checkout, print the
// checkout's commit, whether it had changes and the Go version, for
// --version and for the version subcommand (doclogctl's also as JSON).
func TestBinariesPrintTheirBuild(t *testing.T) {
	t.Parallel()
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		require.NoError(t, err, "git %v", args)
		return strings.TrimSpace(string(out))
	}
	head := git("rev-parse", "HEAD")
	dirtyBefore := git("status", "--porcelain") != ""
	root := git("rev-parse", "--show-toplevel")
	dir := t.TempDir()
	for _, name := range []string{"doclog", "doclogctl"} {
		// -buildvcs=true: the default (auto) stamps a checkout too, but a
		// GOFLAGS=-buildvcs=false in the environment would not.
		build := exec.Command("go", "build", "-buildvcs=true", "-o", filepath.Join(dir, name), "./cmd/"+name)
		build.Dir = root
		out, err := build.CombinedOutput()
		require.NoError(t, err, "go build ./cmd/%s:\n%s", name, out)
	}
	dirtyAfter := git("status", "--porcelain") != ""

	for _, name := range []string{"doclog", "doclogctl"} {
		for _, args := range [][]string{{"--version"}, {"version"}} {
			out, err := exec.Command(filepath.Join(dir, name), args...).CombinedOutput()
			require.NoError(t, err, "%s %v:\n%s", name, args, out)
			line := string(out)
			require.True(t, strings.HasPrefix(line, name+" "), "%s %v: %q", name, args, line)
			require.Contains(t, line, "commit "+head)
			require.Contains(t, line, "; "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+")\n")
			if dirtyBefore && dirtyAfter {
				require.Contains(t, line, head+", modified")
			}
			if !dirtyBefore && !dirtyAfter {
				require.NotContains(t, line, "modified")
			}
		}
	}

	out, err := exec.Command(filepath.Join(dir, "doclogctl"), "version", "-o", "json").Output()
	require.NoError(t, err)
	var in buildinfo.Info
	require.NoError(t, json.Unmarshal(out, &in))
	require.Equal(t, head, in.Commit)
	require.Equal(t, runtime.Version(), in.GoVersion)
	require.NotEmpty(t, in.Version)
	require.NotEmpty(t, in.CommitTime)
}
