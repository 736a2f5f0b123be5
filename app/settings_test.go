package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/httpapi"
)

func TestSettingsValidate(t *testing.T) {
	s := &app.Settings{}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	app.BindFlags(fs, s)
	require.NoError(t, fs.Parse([]string{"--roles=ingest,readstore,bogus", "--http-addr=:1", "--migrate=sometimes",
		"--projectors=docview,analytics", "--database-max-conns=1"}))
	err := s.Validate()
	require.Error(t, err)
	for _, want := range []string{`unknown role "bogus"`, "--http-addr names one API address", "no database",
		"--database-max-conns must be at least 2", "--migrate must be auto or off", "analytics projector needs --clickhouse-url"} {
		require.ErrorContains(t, err, want)
	}

	ok := &app.Settings{}
	fs = pflag.NewFlagSet("y", pflag.ContinueOnError)
	app.BindFlags(fs, ok)
	require.NoError(t, fs.Parse([]string{"--roles=executor", "--database-url=postgres://x", "--clickhouse-url=clickhouse://h:9000/d"}))
	require.NoError(t, ok.Validate())
	require.Contains(t, ok.Projectors, "analytics", "a ClickHouse URL turns the analytics projector on")
}

// Tokens are checked at start: an empty or short one (under
// httpapi.MinTokenLength) and one given both to read and to write are
// refused, naming the flag and the index, never the token.
func TestTokenSettings(t *testing.T) {
	long := func(c string) string { return strings.Repeat(c, httpapi.MinTokenLength) }
	parse := func(args ...string) (*app.Settings, error) {
		s := &app.Settings{}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		app.BindFlags(fs, s)
		require.NoError(t, fs.Parse(append([]string{"--database-url=postgres://x"}, args...)))
		return s, s.Validate()
	}

	s, err := parse()
	require.NoError(t, err)
	require.True(t, s.AuthOff(), "no token at all: authentication off")

	const short = "tooshort1"
	for flag, want := range map[string]string{
		"--auth-write-tokens": "--auth-write-tokens: the token at index 1 (0-based) is 9 characters long; a token needs at least 32",
		"--auth-read-tokens":  "--auth-read-tokens: the token at index 1 (0-based) is 9 characters long; a token needs at least 32",
		"--auth-tokens":       "--auth-tokens: the token at index 1 (0-based) is 9 characters long; a token needs at least 32",
	} {
		_, err := parse(flag + "=" + long("a") + "," + short)
		require.ErrorContains(t, err, want)
		require.NotContains(t, err.Error(), short, "the token itself is never printed")
	}

	_, err = parse("--auth-write-tokens="+long("w"), "--auth-read-tokens="+long("r")+","+long("w"))
	require.ErrorContains(t, err, "--auth-read-tokens: the token at index 1 (0-based) is also the write token at index 0 of --auth-write-tokens")
	require.NotContains(t, err.Error(), long("w"))

	s, err = parse("--auth-read-tokens=" + long("r"))
	require.NoError(t, err)
	require.False(t, s.AuthOff(), "read tokens alone turn authentication on")
	s, err = parse("--auth-tokens=" + long("o"))
	require.NoError(t, err, "the older flag still works")
	require.False(t, s.AuthOff())
}

// Each token list is a secret: it can come from the file
// DOCLOG_AUTH_<LIST>_FILE names, one token a line, as the chart mounts them.
func TestTokenListsFromFiles(t *testing.T) {
	dir := t.TempDir()
	write, read := strings.Repeat("w", 40), strings.Repeat("r", 40)
	env := map[string]string{}
	for name, body := range map[string]string{"auth-write-tokens": write + "\n", "auth-read-tokens": read + "\n" + strings.Repeat("s", 40) + "\n"} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		env[config.FileEnvName(name)] = path
	}
	s := &app.Settings{}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	app.BindFlags(fs, s)
	require.NoError(t, fs.Parse([]string{"--database-url=postgres://x"}))
	require.NoError(t, config.ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	require.NoError(t, s.Validate())
	require.Equal(t, []string{write}, s.AuthWriteTokens)
	require.Equal(t, []string{read, strings.Repeat("s", 40)}, s.AuthReadTokens)
}
