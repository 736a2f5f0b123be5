package pgproj

import (
	"embed"

	"github.com/doclog/doclog/pgmigrate"
)

//go:embed migrations/*.sql
var runnerFS embed.FS

// RunnerMigrations is the runner's own migration set: checkpoints, stream
// heads and quarantines. Apply it with pgmigrate.Migrate, beside each
// projector's own set.
func RunnerMigrations() pgmigrate.Set {
	return pgmigrate.Set{Component: "runner", FS: runnerFS, Dir: "migrations"}
}
