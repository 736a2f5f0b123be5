package config_test

import (
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
