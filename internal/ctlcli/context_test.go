package ctlcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// writeContexts writes a config file with a context "local" on the test
// Postgres and Kafka and a context "broken" on addresses nothing listens
// on, at the default place; none is current.
func writeContexts(t *testing.T) (path, dbURL string, seeds []string, deadKafka, deadPG string) {
	path = isolateConfig(t)
	dbURL = testenv.PostgresSchema(t)
	env := testenv.Kafka(t)
	deadKafka, deadPG = testenv.UnusedAddr(t), testenv.UnusedAddr(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	testenv.WriteFile(t, path, []byte(`# doclogctl's contexts
output: table
contexts:
  - name: local
    database-url: `+dbURL+`
    kafka-seeds: [`+strings.Join(env.Config.Seeds, ", ")+`]
    topics-prefix: `+env.Topics.Prefix+`
  - name: broken
    database-url: postgres://doclog:hunter2@`+deadPG+`/doclog?sslmode=disable
    kafka-seeds: [`+deadKafka+`]
    kafka-sasl-mechanism: SCRAM-SHA-512
    kafka-sasl-username: doclog
    kafka-sasl-password: hunter2
`))
	return path, dbURL, env.Config.Seeds, deadKafka, deadPG
}

func TestContextListUseShow(t *testing.T) {
	path, dbURL, seeds, deadKafka, _ := writeContexts(t)

	code, out, errOut := ctl(t, "context", "list", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var rows []contextRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 2)
	require.Equal(t, "local", rows[0].Name)
	require.False(t, rows[0].Current || rows[1].Current, "no current context yet")

	// Without a current context and without flags, the defaults apply.
	code, _, errOut = ctl(t, "migrate", "status")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "no database")

	code, out, errOut = ctl(t, "context", "use", "local")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `current context: "local"`)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), "# doclogctl's contexts", "the rest of the file is kept")

	// The current context supplies every setting not given.
	code, out, errOut = ctl(t, "migrate", "up")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "applied")
	code, out, errOut = ctl(t, "topics", "create", "--partitions", "1", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, 3, strings.Count(out, `"created": true`), "on the context's prefix")

	code, out, _ = ctl(t, "context", "list")
	require.Equal(t, exitOK, code)
	require.Regexp(t, `\*\s+│ local`, out)
	require.Contains(t, out, strings.Join(seeds, ","))

	// show masks the secrets: the URL's password, and a secret whole.
	code, out, errOut = ctl(t, "context", "show", "broken")
	require.Equal(t, exitOK, code, errOut)
	require.NotContains(t, out, "hunter2")
	require.Contains(t, out, "postgres://doclog:xxxxx@")
	require.Contains(t, out, deadKafka)
	code, out, _ = ctl(t, "context", "show", "-o", "json")
	require.Equal(t, exitOK, code)
	var shown contextRow
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	require.Equal(t, "local", shown.Name, "show without a name is the current context")
	require.True(t, shown.Current)

	code, _, errOut = ctl(t, "context", "use", "nope")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, `has no context "nope"`)
	code, _, errOut = ctl(t, "context", "show", "nope")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, `has no context "nope"`)

	// --context and DOCLOG_CONTEXT choose another; a flag still wins.
	code, _, errOut = ctl(t, "topics", "describe", "--context", "broken")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, `cannot reach Kafka at `+deadKafka+` (context "broken"): set --kafka-seeds or DOCLOG_KAFKA_SEEDS, or update the context`)
	t.Setenv("DOCLOG_CONTEXT", "broken")
	code, out, errOut = ctl(t, "migrate", "status", "--database-url", dbURL)
	require.Equal(t, exitOK, code, errOut)
	require.NotContains(t, out, "pending", "the flag's database, migrated above, not the context's")
	code, _, errOut = ctl(t, "topics", "describe", "--context", "nope")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `has no context "nope" (its contexts: local, broken)`)
}

// An unreachable broker or database names the context, the flag and the
// variable to change.
func TestUnreachableNamesWhatToChange(t *testing.T) {
	_, _, _, deadKafka, deadPG := writeContexts(t)
	code, _, errOut := ctl(t, "status", "--context", "broken")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, `cannot reach Kafka at `+deadKafka+` (context "broken"): set --kafka-seeds or DOCLOG_KAFKA_SEEDS, or update the context`)

	code, _, errOut = ctl(t, "migrate", "status", "--context", "broken")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, `cannot reach Postgres at `+deadPG+` (context "broken"): set --database-url or DOCLOG_DATABASE_URL, or update the context`)
	require.NotContains(t, errOut, "hunter2")

	// Without a context the message says how to make one.
	code, _, errOut = ctl(t, "topics", "describe", "--kafka-seeds", deadKafka)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, `cannot reach Kafka at `+deadKafka+`: set --kafka-seeds or DOCLOG_KAFKA_SEEDS, or add a context`)
}

// The config file of docs/cli.md's Contexts is one doclogctl takes: its
// contexts list, show, and apply to a command.
func TestContextsExample(t *testing.T) {
	isolateConfig(t)
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	text := string(doc)
	start := strings.Index(text, "\n## Contexts\n")
	require.GreaterOrEqual(t, start, 0)
	example := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(text[start:])
	require.NotNil(t, example)
	file := filepath.Join(t.TempDir(), "config.yaml")
	testenv.WriteFile(t, file, []byte(example[1]))

	code, out, errOut := ctl(t, "context", "list", "--config", file, "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var rows []contextRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 2)
	require.Equal(t, "dev", rows[0].Name)
	require.True(t, rows[0].Current)
	require.Contains(t, rows[0].Settings["database-url"], "postgres:xxxxx@")

	// Each context's keys are doclogctl's: applied to migrate status (the
	// database given, as neither example server exists), they pass.
	url := testenv.PostgresSchema(t)
	for _, name := range []string{"dev", "prod"} {
		code, _, errOut = ctl(t, "migrate", "status", "--config", file, "--context", name, "--database-url", url)
		require.Equal(t, exitOK, code, "context %s: %s", name, errOut)
	}
}
