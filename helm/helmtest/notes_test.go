package helmtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// The notes printed after an install say plainly when the APIs answer
// anyone, and not when tokens are configured.
func TestNotesSayWhenAuthenticationIsOff(t *testing.T) {
	t.Parallel()
	const warning = "WARNING: authentication is OFF"

	notes := renderNotes(t)
	require.Contains(t, notes, warning)
	require.Contains(t, notes, "auth.existingSecret")

	notes = renderNotes(t, "--set", "auth.existingSecret=doclog-tokens")
	require.NotContains(t, notes, warning)
	require.Contains(t, notes, "Authentication is on: the APIs accept only the bearer tokens in Secret doclog-tokens.")

	notes = renderNotes(t, "--set", "extraConfig.DOCLOG_AUTH_WRITE_TOKENS=some-token-of-forty-characters-or-so-xyz")
	require.NotContains(t, notes, warning)
	require.Contains(t, notes, "Authentication is on")
	require.NotContains(t, notes, "some-token", "the notes never show a token")

	// Without an API there is nothing to authenticate.
	notes = renderNotes(t, "--set", "ingest.enabled=false", "--set", "readstore.enabled=false")
	require.NotContains(t, notes, warning)
	require.NotContains(t, notes, "Authentication is on")
}

// renderNotes renders the chart's NOTES.txt with helm template, which
// prints no notes: a copy of the chart carries the same text as a
// ConfigMap, which it does print.
func renderNotes(t *testing.T, args ...string) string {
	t.Helper()
	src := filepath.Join(repoRoot(t), chartDir)
	dst := filepath.Join(t.TempDir(), "doclog")
	require.NoError(t, filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
	notes, err := os.ReadFile(filepath.Join(src, "templates", "NOTES.txt"))
	require.NoError(t, err)
	define := `{{- define "notes-under-test" -}}` + "\n" + string(notes) + `{{- end -}}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dst, "templates", "_notes-under-test.tpl"), []byte(define), 0o644))
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-under-test\ndata:\n  NOTES.txt: {{ include \"notes-under-test\" . | quote }}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dst, "templates", "notes-under-test.yaml"), []byte(cm), 0o644))

	out, err := runHelm(t, append([]string{"template", "doclog", dst, "--namespace", "doclog"}, args...)...)
	require.NoError(t, err)
	objs, err := decode(out)
	require.NoError(t, err)
	return find[*corev1.ConfigMap](t, objs, "ConfigMap", "notes-under-test").Data["NOTES.txt"]
}
