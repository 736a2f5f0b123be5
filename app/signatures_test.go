package app_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/doclog/doclog/app"
)

// The signature flags are checked at start: a policy that checks signatures
// needs keys, a policy must be one of the three, and the keys of an ingest
// or executor process must read.
func TestSignatureSettings(t *testing.T) {
	parse := func(args ...string) (*app.Settings, error) {
		s := &app.Settings{}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		app.BindFlags(fs, s)
		require.NoError(t, fs.Parse(append([]string{"--database-url=postgres://x@127.0.0.1:1/x"}, args...)))
		return s, s.Validate()
	}
	_, err := parse()
	require.NoError(t, err, "signatures off by default")
	err = (&app.Settings{Roles: []string{app.RoleExecutor}}).Validate()
	require.NotContains(t, err.Error(), "signature", "settings built without flags have signatures off")
	_, err = parse("--signature-policy=doclog/json=required")
	require.ErrorContains(t, err, "check signatures, which needs --signature-keys")
	_, err = parse("--signature-default-policy=optional")
	require.ErrorContains(t, err, "check signatures, which needs --signature-keys")
	_, err = parse("--signature-policy=doclog/json=sometimes", "--signature-keys=k")
	require.ErrorContains(t, err, `--signature-policy: document type doclog/json: signature policy "sometimes" is not one of required, optional, off`)
	_, err = parse("--signature-default-policy=always")
	require.ErrorContains(t, err, `--signature-default-policy: signature policy "always" is not one of required, optional, off`)

	missing := filepath.Join(t.TempDir(), "absent")
	s, err := parse("--roles=executor", "--signature-policy=doclog/json=required", "--signature-keys="+missing)
	require.NoError(t, err)
	a, err := app.New(context.Background(), s, zap.NewNop())
	require.ErrorContains(t, err, "reading signature keys")
	require.Nil(t, a)
	require.ErrorContains(t, err, missing)
}
