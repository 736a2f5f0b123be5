package helmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/internal/config"
)

// tuningFlags binds the flags of doclog serve and returns the settings, the
// flag set and its tuning flags.
func tuningFlags() (*app.Settings, *pflag.FlagSet, []*pflag.Flag) {
	s := &app.Settings{}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	app.BindFlags(fs, s)
	return s, fs, app.TuningFlags(fs)
}

// valuesPath splits a tuning flag's values key, tuning.<group>.<key>.
func valuesPath(t *testing.T, f *pflag.Flag) (group, key string) {
	t.Helper()
	parts := strings.Split(app.ValuesKey(f), ".")
	require.Len(t, parts, 3, "--%s", f.Name)
	return parts[1], parts[2]
}

// Every tuning flag has its value in values.yaml, with the flag's default,
// and its entry in values.schema.json, of the flag's type; neither holds a
// key no flag reads.
func TestTuningValuesMatchTheFlags(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "helm", "doclog", "values.yaml"))
	require.NoError(t, err)
	var values struct {
		Tuning map[string]map[string]any `json:"tuning"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &values))
	raw, err = os.ReadFile(filepath.Join(root, "helm", "doclog", "values.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Properties struct {
			Tuning struct {
				Properties map[string]struct {
					Properties           map[string]struct{ Type string }
					AdditionalProperties *bool
				}
				AdditionalProperties *bool
			}
		}
	}
	require.NoError(t, json.Unmarshal(raw, &schema))
	tuning := schema.Properties.Tuning
	require.NotNil(t, tuning.AdditionalProperties)
	require.False(t, *tuning.AdditionalProperties, "values.schema.json must refuse unknown tuning groups")

	_, _, flags := tuningFlags()
	require.NotEmpty(t, flags)
	seen := map[string]bool{}
	for _, f := range flags {
		group, key := valuesPath(t, f)
		seen[group+"."+key] = true
		v, ok := values.Tuning[group][key]
		require.True(t, ok, "values.yaml lacks tuning.%s.%s (--%s)", group, key, f.Name)
		// The value, given to a fresh flag, reads back as the default.
		_, fresh, _ := tuningFlags()
		require.NoError(t, fresh.Set(f.Name, yamlString(v)), "tuning.%s.%s", group, key)
		require.Equal(t, f.DefValue, fresh.Lookup(f.Name).Value.String(), "tuning.%s.%s is not the default of --%s", group, key, f.Name)

		g, ok := tuning.Properties[group]
		require.True(t, ok, "values.schema.json lacks tuning.%s", group)
		require.NotNil(t, g.AdditionalProperties, "tuning.%s", group)
		require.False(t, *g.AdditionalProperties, "values.schema.json must refuse unknown keys of tuning.%s", group)
		p, ok := g.Properties[key]
		require.True(t, ok, "values.schema.json lacks tuning.%s.%s", group, key)
		want := "integer"
		switch f.Value.Type() {
		case "duration":
			want = "string"
		case "bool":
			want = "boolean"
		}
		require.Equal(t, want, p.Type, "tuning.%s.%s in values.schema.json", group, key)
	}
	for group, keys := range values.Tuning {
		for key := range keys {
			require.True(t, seen[group+"."+key], "values.yaml sets tuning.%s.%s, which no flag reads", group, key)
		}
	}
	for group, g := range tuning.Properties {
		for key := range g.Properties {
			require.True(t, seen[group+"."+key], "values.schema.json allows tuning.%s.%s, which no flag reads", group, key)
		}
	}
}

// yamlString is a value of values.yaml as a flag would be given it: YAML
// reads integers as float64.
func yamlString(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatInt(int64(v), 10)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

// A value set in the chart reaches the flag: the ConfigMap, read as the
// environment the way doclog serve reads it, sets each tuning flag to what
// the chart was given, and the chart's defaults to the flags' defaults.
func TestTuningReachesTheFlags(t *testing.T) {
	t.Parallel()
	_, _, flags := tuningFlags()
	args := []string{}
	want := map[string]string{}
	for _, f := range flags {
		group, key := valuesPath(t, f)
		v := other(t, f)
		args = append(args, "--set", "tuning."+group+"."+key+"="+v)
		_, fresh, _ := tuningFlags()
		require.NoError(t, fresh.Set(f.Name, v))
		want[f.Name] = fresh.Lookup(f.Name).Value.String()
		require.NotEqual(t, f.DefValue, want[f.Name], "--%s: the test value must differ from the default", f.Name)
	}
	for name, args := range map[string][]string{"defaults": nil, "set": args} {
		cm := find[*corev1.ConfigMap](t, render(t, args...), "ConfigMap", "doclog")
		s, fs, flags := tuningFlags()
		require.NoError(t, config.ApplyEnv(fs, func(k string) (string, bool) { v, ok := cm.Data[k]; return v, ok }), name)
		for _, f := range flags {
			require.Contains(t, cm.Data, config.EnvName(f.Name), "%s: the ConfigMap does not set --%s", name, f.Name)
			expect := f.DefValue
			if name == "set" {
				expect = want[f.Name]
			}
			require.Equal(t, expect, f.Value.String(), "%s: --%s from the ConfigMap's %s=%q", name, f.Name, config.EnvName(f.Name), cm.Data[config.EnvName(f.Name)])
		}
		if name == "defaults" {
			// One role per process, as the chart runs them; the database URL
			// comes from a Secret's file.
			s.Roles, s.DatabaseURL = []string{"executor"}, "postgres://doclog@db/doclog"
			require.NoError(t, s.Validate(), "the chart's default tuning is valid")
		} else {
			require.Equal(t, 2*executor.DefaultJobTimeout, s.Tuning.Executor.JobTimeout, "tuning.executor.jobTimeout reaches the executor's settings")
		}
	}
}

// other is a valid value of tuning flag f other than its default: twice the
// default, or 1 for a default of 0; a switch the other way.
func other(t *testing.T, f *pflag.Flag) string {
	t.Helper()
	if f.Value.Type() == "bool" {
		return strconv.FormatBool(f.DefValue != "true")
	}
	if f.Value.Type() == "duration" {
		d, err := time.ParseDuration(f.DefValue)
		require.NoError(t, err)
		return (2 * d).String()
	}
	n, err := strconv.ParseInt(f.DefValue, 10, 64)
	require.NoError(t, err)
	if n == 0 {
		return "1"
	}
	return strconv.FormatInt(2*n, 10)
}
