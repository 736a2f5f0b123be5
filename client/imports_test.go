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

// The package imports the standard library and google/uuid only, so a
// program importing it builds none of doclog's server code.
func TestImportsNoServerCode(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
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
			first, _, _ := strings.Cut(path, "/")
			allowed := !strings.Contains(first, ".") || path == "github.com/google/uuid"
			require.True(t, allowed, "%s imports %s", f, path)
		}
		checked++
	}
	require.Positive(t, checked)
}
