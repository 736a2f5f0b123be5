package analytics_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/projectors/analytics"
)

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := analytics.Config{Addr: []string{"ch:9000"}}.WithDefaults()
	require.Equal(t, "analytics", c.Name)
	require.Equal(t, "doclog", c.Database)
	require.Equal(t, "default", c.Username)
	require.Equal(t, 10*time.Second, c.DialTimeout)
	require.Equal(t, 30*time.Second, c.InsertTimeout)
	require.Equal(t, 10_000, c.BatchRows)
	require.Equal(t, time.Second, c.BatchDelay)
	require.Equal(t, int32(1<<20), c.BatchMinBytes)
	require.NoError(t, c.Validate())
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(*analytics.Config)
		field  string
	}{
		{"no address", func(c *analytics.Config) { c.Addr = nil }, "addr"},
		{"address without port", func(c *analytics.Config) { c.Addr = []string{"ch"} }, "addr"},
		{"database with a dot", func(c *analytics.Config) { c.Database = "a.b" }, "database"},
		{"database starting with a digit", func(c *analytics.Config) { c.Database = "1db" }, "database"},
		{"negative insert timeout", func(c *analytics.Config) { c.InsertTimeout = -time.Second }, "insert timeout"},
		{"negative batch rows", func(c *analytics.Config) { c.BatchRows = -1 }, "batch rows"},
		{"batch delay too short", func(c *analytics.Config) { c.BatchDelay = time.Millisecond }, "batch delay"},
		{"batch delay too long", func(c *analytics.Config) { c.BatchDelay = time.Hour }, "batch delay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := analytics.Config{Addr: []string{"ch:9000"}}
			tc.mutate(&c)
			err := c.WithDefaults().Validate()
			var ce *analytics.ConfigError
			require.True(t, errors.As(err, &ce), "got %v", err)
			require.Equal(t, tc.field, ce.Field)
		})
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	c, err := analytics.ParseURL("clickhouse://reader:s3cret@ch1,ch2:9001/stats?secure=true&create_database=1")
	require.NoError(t, err)
	require.Equal(t, []string{"ch1:9440", "ch2:9001"}, c.Addr)
	require.Equal(t, "reader", c.Username)
	require.Equal(t, "s3cret", c.Password)
	require.Equal(t, "stats", c.Database)
	require.True(t, c.CreateDatabase)
	require.NotNil(t, c.TLS)
	require.NoError(t, c.WithDefaults().Validate())

	c, err = analytics.ParseURL("tcp://ch")
	require.NoError(t, err)
	require.Equal(t, []string{"ch:9000"}, c.Addr)
	require.Nil(t, c.TLS)
	require.Equal(t, "doclog", c.WithDefaults().Database)

	for _, bad := range []string{"http://ch:8123", "clickhouse://ch?secure=maybe", "::"} {
		_, err := analytics.ParseURL(bad)
		var ce *analytics.ConfigError
		require.True(t, errors.As(err, &ce), "%s: got %v", bad, err)
	}
}
