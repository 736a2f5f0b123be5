package client_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The package imports the standard library, google/uuid and doclog's
// retry delays (internal/backoff, itself of the standard library only), so
// a program importing it builds none of doclog's server code.
func TestImportsNoServerCode(t *testing.T) {
	t.Parallel()
	const delays = "github.com/doclog/doclog/internal/backoff"
	checked := checkImports(t, ".", func(path string) bool {
		return stdlib(path) || path == "github.com/google/uuid" || path == delays
	})
	require.Positive(t, checked)
	require.Positive(t, checkImports(t, filepath.Join("..", "internal", "backoff"), stdlib))
}

func stdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// checkImports holds the imports of dir's non-test files to allowed and
// returns how many files it read.
func checkImports(t *testing.T, dir string, allowed func(string) bool) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			require.True(t, allowed(path), "%s imports %s", f, path)
		}
		checked++
	}
	return checked
}
