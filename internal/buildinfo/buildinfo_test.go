package buildinfo_test

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/buildinfo"
)

func TestFrom(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/doclog/doclog", Version: "v0.3.1"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-01T13:58:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	in := buildinfo.From(bi)
	require.Equal(t, buildinfo.Info{Version: "v0.3.1", Commit: "0123456789abcdef0123456789abcdef01234567",
		CommitTime: "2026-12-01T13:58:00Z", Modified: true, GoVersion: "go1.26.8", Platform: "linux/arm64"}, in)
	require.Equal(t, "v0.3.1 (commit 0123456789abcdef0123456789abcdef01234567, modified, 2026-12-01T13:58:00Z; go1.26.8 linux/arm64)", in.String())
}

func TestFromWithoutVCS(t *testing.T) {
	t.Parallel()
	in := buildinfo.From(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/doclog/doclog"}})
	require.Equal(t, "(devel) (commit unknown; go1.26.8)", in.String())
	require.False(t, in.Modified)
}
