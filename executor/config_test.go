package executor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := executor.Config{}.WithDefaults()
	require.Equal(t, kafka.TopicNames(""), c.Topics)
	require.Equal(t, executor.DefaultGroup, c.Group)
	require.Equal(t, executor.DefaultMaxRetries, c.MaxRetries)
	require.EqualValues(t, executor.DefaultKeyframeInterval, c.KeyframeInterval)
	require.EqualValues(t, model.DefaultKeyframeInterval, c.KeyframeInterval, "the keyframe rule's own default")
	require.Equal(t, executor.DefaultRetryBaseDelay, c.RetryBaseDelay)
	require.Equal(t, executor.DefaultRetryMaxDelay, c.RetryMaxDelay)
	require.Equal(t, executor.DefaultConflictBudget, c.ConflictBudget)
	require.Equal(t, executor.DefaultJobTimeout, c.JobTimeout)
	require.Equal(t, executor.DefaultOffsetCommitInterval, c.OffsetCommitInterval)
	require.NotNil(t, c.Logger)
	require.Zero(t, c.SessionTimeout, "zero keeps Kafka.Membership's")
	require.Equal(t, executor.DefaultRebalanceTimeout, c.RebalanceTimeout)
	require.Equal(t, executor.DefaultFetchMaxWait, c.FetchMaxWait)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	valid := func() executor.Config {
		return executor.Config{
			Store:    postgres.New(nil),
			Registry: reg,
			Kafka:    kafka.Config{Seeds: []string{"localhost:9092"}},
		}.WithDefaults()
	}
	require.NoError(t, valid().Validate())
	for name, tc := range map[string]struct {
		change func(*executor.Config)
		want   string
	}{
		"no store":                 {func(c *executor.Config) { c.Store = nil }, "store is required"},
		"no registry":              {func(c *executor.Config) { c.Registry = nil }, "registry is required"},
		"no seeds":                 {func(c *executor.Config) { c.Kafka.Seeds = nil }, "kafka seeds are required"},
		"no topic":                 {func(c *executor.Config) { c.Topics.DeadLetters = "" }, "dead-letter"},
		"negative delay":           {func(c *executor.Config) { c.RetryBaseDelay = -time.Second }, "retry base delay must be positive"},
		"max below base":           {func(c *executor.Config) { c.RetryMaxDelay = time.Millisecond }, "below the base delay"},
		"negative retries":         {func(c *executor.Config) { c.MaxRetries = -1 }, "max retries must be at least 0"},
		"negative session":         {func(c *executor.Config) { c.SessionTimeout = -1 }, "session timeout must be positive"},
		"zero budget":              {func(c *executor.Config) { c.ConflictBudget = -1 }, "conflict budget must be at least 1"},
		"negative commit interval": {func(c *executor.Config) { c.OffsetCommitInterval = -time.Second }, "offset commit interval must be positive"},
	} {
		t.Run(name, func(t *testing.T) {
			c := valid()
			tc.change(&c)
			require.ErrorContains(t, c.Validate(), tc.want)
		})
	}
}
