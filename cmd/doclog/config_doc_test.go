package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/config"
)

// TestConfigurationDocumented keeps docs/configuration.md in step with the
// flags: every flag of serve and its variable appear in it.
func TestConfigurationDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	cmd := newServeCmd(&bytes.Buffer{})
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		require.True(t, bytes.Contains(doc, []byte("`--"+f.Name+"`")), "docs/configuration.md lacks --%s", f.Name)
		require.True(t, bytes.Contains(doc, []byte(config.EnvName(f.Name))), "docs/configuration.md lacks %s", config.EnvName(f.Name))
	})
}

func TestSettingsValidate(t *testing.T) {
	s := &settings{}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	bindFlags(fs, s)
	require.NoError(t, fs.Parse([]string{"--roles=ingest,readstore,bogus", "--http-addr=:1", "--migrate=sometimes",
		"--projectors=docview,analytics", "--database-max-conns=1"}))
	err := s.validate()
	require.Error(t, err)
	for _, want := range []string{`unknown role "bogus"`, "--http-addr names one API address", "no database",
		"--database-max-conns must be at least 2", "--migrate must be auto or off", "analytics projector needs --clickhouse-url"} {
		require.ErrorContains(t, err, want)
	}

	ok := &settings{}
	fs = pflag.NewFlagSet("y", pflag.ContinueOnError)
	bindFlags(fs, ok)
	require.NoError(t, fs.Parse([]string{"--roles=executor", "--database-url=postgres://x", "--clickhouse-url=clickhouse://h:9000/d"}))
	require.NoError(t, ok.validate())
	require.Contains(t, ok.projectors, "analytics", "a ClickHouse URL turns the analytics projector on")
}
