package servicecli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
)

// TestConfigurationDocumented keeps docs/configuration.md in step with the
// flags: every flag of serve and its variable appear in it, and a secret's
// _FILE variable too; the shared connection settings are listed as such.
func TestConfigurationDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	cmd := newServeCmd(&bytes.Buffer{})
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		require.True(t, bytes.Contains(doc, []byte("`--"+f.Name+"`")), "docs/configuration.md lacks --%s", f.Name)
		require.True(t, bytes.Contains(doc, []byte(config.EnvName(f.Name))), "docs/configuration.md lacks %s", config.EnvName(f.Name))
		if config.IsSecret(f) {
			require.True(t, bytes.Contains(doc, []byte("`"+config.FileEnvName(f.Name)+"`")), "docs/configuration.md lacks %s", config.FileEnvName(f.Name))
		}
	})
	shared := section(t, string(doc), "## Connection settings shared with doclogctl")
	for _, name := range connflags.Names() {
		require.Contains(t, shared, "`--"+name+"`", "the shared connection settings in docs/configuration.md lack --%s", name)
		require.NotNil(t, cmd.Flags().Lookup(name), "serve lacks the connection flag --%s", name)
	}
}

// The config file example of docs/configuration.md is one serve takes,
// and a file's setting loses to a variable and a flag.
func TestConfigFileExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	example := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(section(t, string(doc), "## Config file"))
	require.NotNil(t, example, "docs/configuration.md has a YAML example under Config file")
	file := filepath.Join(t.TempDir(), "doclog.yaml")
	require.NoError(t, os.WriteFile(file, []byte(example[1]), 0o600))

	for _, k := range []string{"DOCLOG_CONFIG", "DOCLOG_DATABASE_MAX_CONNS", "DOCLOG_KAFKA_DIAL_TIMEOUT"} {
		t.Setenv(k, "")
		require.NoError(t, os.Unsetenv(k))
	}
	cmd := newServeCmd(&bytes.Buffer{})
	require.NoError(t, cmd.ParseFlags([]string{"--config", file, "--database-max-conns", "7"}))
	t.Setenv("DOCLOG_KAFKA_DIAL_TIMEOUT", "3s")
	require.NoError(t, fromEnv(cmd, nil))
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	require.Equal(t, "[executor,projectors]", get("roles"), "from the file")
	require.Equal(t, "[kafka-0.kafka:9093,kafka-1.kafka:9093]", get("kafka-seeds"), "a YAML list")
	require.Equal(t, "SCRAM-SHA-512", get("kafka-sasl-mechanism"))
	require.Equal(t, "3s", get("kafka-dial-timeout"), "the variable wins over the file")
	require.Equal(t, "7", get("database-max-conns"), "the flag wins over the file")

	// A key that is no flag of serve is refused, by name.
	require.NoError(t, os.WriteFile(file, []byte(example[1]+"kafka-sasl-pasword: x\n"), 0o600))
	cmd = newServeCmd(&bytes.Buffer{})
	require.NoError(t, cmd.ParseFlags([]string{"--config", file}))
	require.ErrorContains(t, fromEnv(cmd, nil), `unknown setting "kafka-sasl-pasword"`)
}

// section is the text of doc from the heading to the next of its level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "no %q", heading)
	rest := doc[i+len(heading)+2:]
	level := heading[:strings.Index(heading, " ")+1]
	if j := strings.Index(rest, "\n"+level); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
