package projectors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/pgproj"
)

func validConfig(t *testing.T) projectors.Config {
	t.Helper()
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	return projectors.Config{
		Projector: docview.Projector{}, Store: pgproj.New(nil), Log: postgres.New(nil), Registry: reg,
		Kafka: kafka.Config{Seeds: []string{"127.0.0.1:1"}},
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	c := validConfig(t).WithDefaults()
	require.NoError(t, c.Validate())
	require.Equal(t, "doclog.write-ready", c.Topic)
	require.Equal(t, "doclog-docview", c.Group)
	require.Equal(t, projectors.DefaultMaxPollRecords, c.MaxPollRecords)
	require.Equal(t, int64(projectors.DefaultHeadCacheBytes), c.HeadCacheBytes)
	require.Equal(t, projectors.DefaultReconcileInterval, c.ReconcileInterval)
	require.Equal(t, projectors.DefaultRebalanceTimeout, c.RebalanceTimeout)
	require.Equal(t, projectors.DefaultFetchMaxWait, c.FetchMaxWait)
	require.NotNil(t, c.Logger)
	require.NotNil(t, c.Registerer)

	for name, tc := range map[string]struct {
		mutate func(*projectors.Config)
		want   string
	}{
		"no projector":     {func(c *projectors.Config) { c.Projector = nil }, "needs a projector"},
		"no store":         {func(c *projectors.Config) { c.Store = nil }, "needs a store"},
		"no log":           {func(c *projectors.Config) { c.Log = nil }, "operation log"},
		"no registry":      {func(c *projectors.Config) { c.Registry = nil }, "model registry"},
		"bad poll":         {func(c *projectors.Config) { c.MaxPollRecords = -1 }, "max poll records"},
		"bad page":         {func(c *projectors.Config) { c.ReconcilePageSize = -1 }, "page size"},
		"bad delays":       {func(c *projectors.Config) { c.RetryMaxDelay = time.Nanosecond }, "retry delays"},
		"no seeds":         {func(c *projectors.Config) { c.Kafka.Seeds = nil }, "kafka seeds"},
		"short rebalance":  {func(c *projectors.Config) { c.RebalanceTimeout = time.Millisecond }, "rebalance timeout must be at least 100ms"},
		"short fetch wait": {func(c *projectors.Config) { c.FetchMaxWait = -time.Second }, "fetch max wait must be at least 10ms"},
		"unnamed group":    {func(c *projectors.Config) { c.Group = ""; c.Projector = unnamed{} }, "name must not be empty"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := validConfig(t)
			tc.mutate(&c)
			_, err := projectors.New(c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

type unnamed struct{ docview.Projector }

func (unnamed) Name() string { return "" }

func TestLifecycle(t *testing.T) {
	t.Parallel()
	r, err := projectors.New(validConfig(t))
	require.NoError(t, err)
	require.Error(t, r.Ready(), "not running before Start")
	require.NoError(t, r.Stop(context.Background()))
	require.NoError(t, r.Stop(context.Background())) // harmless
	require.Error(t, r.Start(context.Background()), "a stopped runner does not start")
	require.Error(t, r.Ready())
}
