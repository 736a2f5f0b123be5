package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/doclog/doclog/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestApplyEnv(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	seeds := fs.StringSlice("kafka-seeds", []string{"localhost:9092"}, "seeds")
	parts := fs.Int("jobs-partitions", 12, "partitions")
	wait := fs.Duration("max-wait", time.Second, "wait")
	addr := fs.String("ingest-addr", ":8080", "addr")
	require.NoError(t, fs.Parse([]string{"--jobs-partitions=3"}))

	env := map[string]string{
		"DOCLOG_KAFKA_SEEDS":     "a:1,b:2",
		"DOCLOG_JOBS_PARTITIONS": "99", // the flag wins
		"DOCLOG_MAX_WAIT":        "250ms",
	}
	require.NoError(t, config.ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	require.Equal(t, []string{"a:1", "b:2"}, *seeds)
	require.Equal(t, 3, *parts, "a flag given on the command line wins over the environment")
	require.Equal(t, 250*time.Millisecond, *wait)
	require.Equal(t, ":8080", *addr, "the default stands when neither is given")

	fresh := pflag.NewFlagSet("y", pflag.ContinueOnError)
	fresh.Duration("max-wait", time.Second, "wait")
	bad := map[string]string{"DOCLOG_MAX_WAIT": "soon"}
	err := config.ApplyEnv(fresh, func(k string) (string, bool) { v, ok := bad[k]; return v, ok })
	require.ErrorContains(t, err, `DOCLOG_MAX_WAIT="soon"`)
}

func TestAnnotateUsage(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("database-url", "", "Postgres URL")
	config.AnnotateUsage(fs)
	config.AnnotateUsage(fs)
	require.Equal(t, "Postgres URL (env DOCLOG_DATABASE_URL)", fs.Lookup("database-url").Usage)
}

// secretFlags is a flag set with secrets of each kind doclog has: a URL and
// a token list.
func secretFlags(t *testing.T, args ...string) (*pflag.FlagSet, *string, *[]string) {
	t.Helper()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	url := fs.String("database-url", "", "Postgres URL")
	tokens := fs.StringSlice("auth-tokens", nil, "tokens")
	fs.String("log-level", "info", "level")
	config.MarkSecret(fs, "database-url", "auth-tokens")
	require.NoError(t, fs.Parse(args))
	return fs, url, tokens
}

func writeSecret(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// A secret flag is read from the file its _FILE variable names: a value
// without its trailing line break, a list one entry per line.
func TestApplyEnvSecretFiles(t *testing.T) {
	t.Parallel()
	fs, url, tokens := secretFlags(t)
	env := map[string]string{
		"DOCLOG_DATABASE_URL_FILE": writeSecret(t, "postgres://u:p@db/doclog\n"),
		"DOCLOG_AUTH_TOKENS_FILE":  writeSecret(t, "first-token\r\n\n  second-token  \nthird,fourth\n"),
		"DOCLOG_LOG_LEVEL_FILE":    writeSecret(t, "debug\n"), // not a secret: no _FILE form
	}
	require.NoError(t, config.ApplyEnv(fs, lookupIn(env)))
	require.NoError(t, config.ApplyEnv(fs, lookupIn(env)), "applying twice (doclog dev does) is harmless")
	require.Equal(t, "postgres://u:p@db/doclog", *url)
	require.Equal(t, []string{"first-token", "second-token", "third", "fourth"}, *tokens,
		"one token per line; a comma-separated list written for the variable works too")
	level, err := fs.GetString("log-level")
	require.NoError(t, err)
	require.Equal(t, "info", level, "only secrets are read from files")

	fresh, url, tokens := secretFlags(t)
	require.NoError(t, config.ApplyEnv(fresh, lookupIn(map[string]string{
		"DOCLOG_DATABASE_URL": "postgres://env/db", "DOCLOG_AUTH_TOKENS": "a,b",
	})))
	require.Equal(t, "postgres://env/db", *url, "the plain variable still works")
	require.Equal(t, []string{"a", "b"}, *tokens)
}

// A secret given twice, or a file that cannot give it, is an error naming
// the variable and the path, and never quoting the secret.
func TestApplyEnvSecretFileErrors(t *testing.T) {
	t.Parallel()
	good := writeSecret(t, "postgres://u:hunter2@db/doclog\n")
	missing := filepath.Join(t.TempDir(), "absent")
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want []string
	}{
		"variable and file": {
			env:  map[string]string{"DOCLOG_DATABASE_URL": "postgres://u:hunter2@db/x", "DOCLOG_DATABASE_URL_FILE": good},
			want: []string{"DOCLOG_DATABASE_URL and DOCLOG_DATABASE_URL_FILE are both set"},
		},
		"flag and file": {
			args: []string{"--database-url=postgres://u:hunter2@db/x"},
			env:  map[string]string{"DOCLOG_DATABASE_URL_FILE": good},
			want: []string{"--database-url and DOCLOG_DATABASE_URL_FILE are both given"},
		},
		"unreadable file": {
			env:  map[string]string{"DOCLOG_AUTH_TOKENS_FILE": missing},
			want: []string{"DOCLOG_AUTH_TOKENS_FILE", missing, "no such file or directory"},
		},
		"empty file": {
			env:  map[string]string{"DOCLOG_AUTH_TOKENS_FILE": writeSecret(t, "\n")},
			want: []string{"DOCLOG_AUTH_TOKENS_FILE", "is empty"},
		},
		"empty path": {
			env:  map[string]string{"DOCLOG_DATABASE_URL_FILE": ""},
			want: []string{"DOCLOG_DATABASE_URL_FILE is set but empty"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fs, _, _ := secretFlags(t, tc.args...)
			err := config.ApplyEnv(fs, lookupIn(tc.env))
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.NotContains(t, err.Error(), "hunter2")
		})
	}

	// A secret that does not parse is named, not quoted.
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.Int("pin", 0, "a numeric secret")
	config.MarkSecret(fs, "pin")
	err := config.ApplyEnv(fs, lookupIn(map[string]string{"DOCLOG_PIN": "hunter2"}))
	require.ErrorContains(t, err, "DOCLOG_PIN")
	require.NotContains(t, err.Error(), "hunter2")
	err = config.ApplyEnv(fs, lookupIn(map[string]string{"DOCLOG_PIN_FILE": writeSecret(t, "hunter2\n")}))
	require.ErrorContains(t, err, "DOCLOG_PIN_FILE")
	require.NotContains(t, err.Error(), "hunter2")

	require.Panics(t, func() { config.MarkSecret(fs, "no-such-flag") })
}

func TestAnnotateUsageOfSecrets(t *testing.T) {
	t.Parallel()
	fs, _, _ := secretFlags(t)
	config.AnnotateUsage(fs)
	config.AnnotateUsage(fs)
	require.Equal(t, "Postgres URL (env DOCLOG_DATABASE_URL, or DOCLOG_DATABASE_URL_FILE naming a file that holds it)", fs.Lookup("database-url").Usage)
	require.Equal(t, "level (env DOCLOG_LOG_LEVEL)", fs.Lookup("log-level").Usage)
}
