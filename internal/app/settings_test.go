package app_test

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/app"
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
