package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

func fileFlags() (*pflag.FlagSet, *string, *[]string, *string) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	db := fs.String("database-url", "", "")
	seeds := fs.StringSlice("kafka-seeds", []string{"localhost:9092"}, "")
	out := fs.String("output", "table", "")
	fs.String(FileFlag, "", "")
	MarkSecret(fs, "database-url")
	return fs, db, seeds, out
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

const sample = `# settings for every context
output: json
kafka-seeds: [a:1]
current-context: dev
contexts:
  - name: dev # doclog dev's
    database-url: postgres://u:secret@127.0.0.1:5432/db
    kafka-seeds: [127.0.0.1:9092, 127.0.0.1:9093]
  - name: prod
    kafka-seeds: kafka:9093
`

// A flag wins over its variable, which wins over the context, which wins
// over the top level, which wins over the default.
func TestFilePrecedence(t *testing.T) {
	f, err := ReadFile(writeFile(t, sample), false)
	require.NoError(t, err)
	require.Equal(t, "dev", f.CurrentContext)

	fs, db, seeds, out := fileFlags()
	require.NoError(t, fs.Parse(nil))
	require.NoError(t, f.Apply(fs, "dev", nil))
	require.Equal(t, "postgres://u:secret@127.0.0.1:5432/db", *db)
	require.Equal(t, []string{"127.0.0.1:9092", "127.0.0.1:9093"}, *seeds, "the context over the top level")
	require.Equal(t, "json", *out, "the top level over the default")

	fs, _, seeds, out = fileFlags()
	require.NoError(t, fs.Parse([]string{"--output", "table"}))
	lookup := func(k string) (string, bool) {
		if k == "DOCLOG_KAFKA_SEEDS" {
			return "env:1", true
		}
		return "", false
	}
	require.NoError(t, ApplyEnv(fs, lookup))
	require.NoError(t, f.Apply(fs, "prod", nil))
	require.Equal(t, []string{"env:1"}, *seeds, "the variable over the context")
	require.Equal(t, "table", *out, "the flag over the file")

	fs, _, _, _ = fileFlags()
	require.ErrorContains(t, f.Apply(fs, "staging", nil), `has no context "staging" (its contexts: dev, prod)`)
}

func TestFileRefusesUnknownKeys(t *testing.T) {
	f, err := ReadFile(writeFile(t, "kafka-seed: a:1\ncontexts:\n  - name: x\n    outptu: json\n"), false)
	require.NoError(t, err)
	fs, _, _, _ := fileFlags()
	err = f.Apply(fs, "x", nil)
	require.ErrorContains(t, err, `context "x": unknown setting "outptu"`)
	require.ErrorContains(t, err, `the top level: unknown setting "kafka-seed"`)

	f, err = ReadFile(writeFile(t, "config: other.yaml\n"), false)
	require.NoError(t, err)
	require.ErrorContains(t, f.Apply(fs, "", nil), `unknown setting "config"`, "a file cannot name another")

	f, err = ReadFile(writeFile(t, "output: [a, b]\n"), false)
	require.NoError(t, err)
	require.ErrorContains(t, f.Apply(fs, "", nil), "output takes one value, not a list")

	_, err = ReadFile(writeFile(t, "- a\n"), false)
	require.ErrorContains(t, err, "not a mapping")
	_, err = ReadFile(filepath.Join(t.TempDir(), "none.yaml"), false)
	require.Error(t, err, "a file named but missing")
	f, err = ReadFile(filepath.Join(t.TempDir(), "none.yaml"), true)
	require.NoError(t, err, "the default location, not written yet")
	require.Empty(t, f.Contexts)
}

// A secret's invalid value is not quoted in the error.
func TestFileSecretNotQuoted(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Int("database-max-conns", 1, "")
	MarkSecret(fs, "database-max-conns")
	f, err := ReadFile(writeFile(t, "database-max-conns: hunter2\n"), false)
	require.NoError(t, err)
	err = f.Apply(fs, "", nil)
	require.ErrorContains(t, err, "not a valid value of --database-max-conns")
	require.NotContains(t, err.Error(), "hunter2")
}

// Writing a context keeps the rest of the file, comments included, and
// the file is its owner's alone.
func TestFileSetContextKeepsTheRest(t *testing.T) {
	path := writeFile(t, sample)
	f, err := ReadFile(path, false)
	require.NoError(t, err)
	c := NewContext("dev")
	c.Set("database-url", "postgres://u:new@127.0.0.1:6000/db")
	c.SetList("kafka-seeds", []string{"127.0.0.1:7000"})
	f.SetContext(*c)
	n := NewContext("staging")
	n.Set("output", "json")
	f.SetContext(*n)
	f.SetCurrentContext("staging")
	require.NoError(t, f.Write())

	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), "# settings for every context")
	require.Contains(t, string(data), "output: json")

	g, err := ReadFile(path, false)
	require.NoError(t, err)
	require.Equal(t, "staging", g.CurrentContext)
	require.Len(t, g.Contexts, 3)
	dev, ok := g.Context("dev")
	require.True(t, ok)
	require.Equal(t, []string{"127.0.0.1:7000"}, dev.Values("kafka-seeds"))
	require.Equal(t, "postgres://u:new@127.0.0.1:6000/db", dev.Settings["database-url"])
	prod, _ := g.Context("prod")
	require.Equal(t, "kafka:9093", prod.Settings["kafka-seeds"], "the other contexts are kept")

	// A new file, in a directory that does not exist yet.
	fresh, err := ReadFile(filepath.Join(t.TempDir(), "doclog", "config.yaml"), true)
	require.NoError(t, err)
	fresh.SetContext(*c)
	fresh.SetCurrentContext("dev")
	require.NoError(t, fresh.Write())
	again, err := ReadFile(fresh.Path, false)
	require.NoError(t, err)
	require.Equal(t, "dev", again.CurrentContext)
	require.Equal(t, []string{"dev"}, []string{again.Contexts[0].Name})
}
