package ctlcli

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
	"github.com/doclog/doclog/internal/testenv"
)

// secureSettings are the test broker's SASL_SSL listener's settings as
// flag name and value: TLS with the test CA and client certificate, then
// SCRAM-SHA-512.
func secureSettings(t *testing.T) (env *testenv.KafkaEnv, settings [][2]string) {
	env = testenv.KafkaSecure(t)
	k := env.Config
	return env, [][2]string{
		{"kafka-seeds", strings.Join(k.Seeds, ",")},
		{"kafka-tls-enabled", "true"},
		{"kafka-tls-ca-file", k.TLS.CAFile},
		{"kafka-tls-cert-file", k.TLS.CertFile},
		{"kafka-tls-key-file", k.TLS.KeyFile},
		{"kafka-sasl-mechanism", "SCRAM-SHA-512"},
		{"kafka-sasl-username", k.SASL.Username},
		{"kafka-sasl-password", k.SASL.Password},
		{"topics-prefix", env.Topics.Prefix},
	}
}

// describeExisting runs `topics describe -o json` and returns each topic's
// existence.
func describeExisting(t *testing.T, args ...string) map[string]bool {
	t.Helper()
	code, out, errOut := ctl(t, append([]string{"topics", "describe", "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	var rows []struct {
		Topic  string `json:"topic"`
		Exists bool   `json:"exists"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	exists := map[string]bool{}
	for _, r := range rows {
		exists[r.Topic] = r.Exists
	}
	return exists
}

// doclogctl reaches a TLS + SCRAM-SHA-512 cluster with the settings doclog
// serve takes, in each of their forms: flags, DOCLOG_* variables with the
// password in a _FILE, and a config file; without the credentials it fails
// and the broker's refusal says what is missing.
func TestSecuredKafkaEveryForm(t *testing.T) {
	isolateConfig(t)
	env, settings := secureSettings(t)

	// Flags: create the topics.
	var flags []string
	for _, s := range settings {
		flags = append(flags, "--"+s[0]+"="+s[1])
	}
	code, out, errOut := ctl(t, append([]string{"topics", "create", "--partitions", "1", "--replication-factor", "1", "-o", "json"}, flags...)...)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, 3, strings.Count(out, `"created": true`), out)
	want := map[string]bool{env.Names.Jobs: true, env.Names.WriteReady: true, env.Names.DeadLetters: true}
	require.Equal(t, want, describeExisting(t, flags...))
	// status, which reaches Kafka and Postgres, with the same flags. A
	// fresh broker answers COORDINATOR_NOT_AVAILABLE until it has made its
	// offsets topic, so status is tried until it succeeds.
	statusArgs := append([]string{"status", "--database-url", migrated(t)}, flags...)
	require.Eventually(t, func() bool {
		code, out, errOut = ctl(t, statusArgs...)
		return code == exitOK
	}, time.Minute, 500*time.Millisecond, "status over TLS + SCRAM: %s", errOut)
	require.Contains(t, out, env.Names.Jobs, "status lists the topics it reached")

	// Variables, the password from the file DOCLOG_KAFKA_SASL_PASSWORD_FILE names.
	dir := t.TempDir()
	for _, s := range settings {
		if s[0] == "kafka-sasl-password" {
			pw := filepath.Join(dir, "password")
			testenv.WriteFile(t, pw, []byte(s[1]+"\n"))
			t.Setenv("DOCLOG_KAFKA_SASL_PASSWORD_FILE", pw)
			continue
		}
		t.Setenv("DOCLOG_"+strings.ToUpper(strings.ReplaceAll(s[0], "-", "_")), s[1])
	}
	require.Equal(t, want, describeExisting(t))
	// An empty variable is a value (an empty list of seeds), so unset
	// them; t.Setenv restores them at the end.
	for _, s := range settings {
		require.NoError(t, os.Unsetenv("DOCLOG_"+strings.ToUpper(strings.ReplaceAll(s[0], "-", "_"))))
	}
	require.NoError(t, os.Unsetenv("DOCLOG_KAFKA_SASL_PASSWORD_FILE"))

	// A config file, named by --config and by DOCLOG_CONFIG.
	var yaml strings.Builder
	for _, s := range settings {
		yaml.WriteString(s[0] + ": " + s[1] + "\n")
	}
	file := filepath.Join(dir, "doclog.yaml")
	testenv.WriteFile(t, file, []byte(yaml.String()))
	require.Equal(t, want, describeExisting(t, "--config", file))
	t.Setenv("DOCLOG_CONFIG", file)
	require.Equal(t, want, describeExisting(t))

	// A flag wins over the file: a wrong password given on the command
	// line is used, and refused.
	code, _, errOut = ctl(t, "topics", "describe", "--kafka-sasl-password", "not-the-password")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "SASL")

	// An unknown key is an error that names it, not a setting ignored.
	testenv.WriteFile(t, file, []byte(yaml.String()+"kafka-seed: 127.0.0.1:9092\n"))
	code, _, errOut = ctl(t, "topics", "describe")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `unknown setting "kafka-seed"`)

	// Without the credentials: TLS alone is refused by SASL, and plain
	// text by TLS, each with the broker's reason.
	t.Setenv("DOCLOG_CONFIG", "")
	tlsOnly := []string{}
	for _, f := range flags {
		if !strings.Contains(f, "sasl") {
			tlsOnly = append(tlsOnly, f)
		}
	}
	code, _, errOut = ctl(t, append([]string{"topics", "describe"}, tlsOnly...)...)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "is SASL missing?")
	code, _, errOut = ctl(t, "topics", "describe", "--kafka-seeds", settings[0][1])
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "plaintext connection speaking to a tls endpoint")
}

// isolateConfig points the default config file into a directory of the
// test's, so the user's own contexts never take part.
func isolateConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("HOME", dir)
	t.Setenv("DOCLOG_CONFIG", "")
	t.Setenv("DOCLOG_CONTEXT", "")
	return filepath.Join(dir, "doclog", "config.yaml")
}

// docs/cli.md documents every global flag, and the connection flags are
// the ones doclog serve has (internal/connflags), secrets marked the same.
func TestGlobalFlagsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	pf := newRoot(io.Discard, io.Discard).PersistentFlags()
	pf.VisitAll(func(f *pflag.Flag) {
		require.Regexp(t, "`(-[a-z], )?--"+f.Name+"`", string(doc), "docs/cli.md lacks the global flag --%s", f.Name)
		if config.IsSecret(f) {
			require.Contains(t, string(doc), "`"+config.FileEnvName(f.Name)+"`", "docs/cli.md lacks %s", config.FileEnvName(f.Name))
		}
	})
	for _, name := range connflags.Names() {
		require.NotNil(t, pf.Lookup(name), "doclogctl lacks the connection flag --%s", name)
	}
	for _, name := range connflags.SecretFlags {
		require.True(t, config.IsSecret(pf.Lookup(name)), "--%s is a secret", name)
	}
}
