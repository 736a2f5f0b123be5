// Package buildinfo owns what a doclog binary says about its own build: the
// module version, the commit it was built from and whether the work tree
// had changes, and the Go toolchain, all as the Go toolchain recorded them
// in the binary (runtime/debug.ReadBuildInfo). Both commands print it for
// --version and their version subcommand.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info describes one build.
type Info struct {
	// Version is the main module's version: a tag, a pseudo-version
	// derived from the commit, or "(devel)" when the toolchain had none.
	Version string `json:"version"`
	// Commit is vcs.revision, "" when the binary was built outside a
	// checkout (or with -buildvcs=false).
	Commit string `json:"commit"`
	// CommitTime is vcs.time, RFC 3339, "" when unknown.
	CommitTime string `json:"commitTime,omitempty"`
	// Modified is vcs.modified: the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH of the build.
	Platform string `json:"platform"`
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "(unknown)", GoVersion: "(unknown)"}
	}
	return From(bi)
}

// From extracts Info from a build's recorded information.
func From(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.CommitTime = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		in.Platform = goos + "/" + goarch
	}
	return in
}

// String is the one-line form --version prints after the command's name:
//
//	v1.2.0 (commit 345d4f6216910934f6f8a9d13eb42603e63e99a8, modified, 2026-12-01T13:58:00Z; go1.26.8 linux/amd64)
func (in Info) String() string {
	var commit []string
	if in.Commit == "" {
		commit = append(commit, "commit unknown")
	} else {
		commit = append(commit, "commit "+in.Commit)
		if in.Modified {
			commit = append(commit, "modified")
		}
		if in.CommitTime != "" {
			commit = append(commit, in.CommitTime)
		}
	}
	build := in.GoVersion
	if in.Platform != "" {
		build += " " + in.Platform
	}
	return fmt.Sprintf("%s (%s; %s)", in.Version, strings.Join(commit, ", "), build)
}
