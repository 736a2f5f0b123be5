package chaos

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RepoRoot finds the module root from the working directory, so the run finds
// scripts/ whether it was started by `go test` in this package or by
// scripts/chaos.sh at the top.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("reading the working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "scripts", "kafka.sh")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no go.mod with scripts/kafka.sh above the working directory")
		}
		dir = parent
	}
}
