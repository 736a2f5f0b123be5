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
// flags: every flag of serve and its variable appear in it, and a secret's
// _FILE variable too.
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
}
