package app

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/projectors"
)

// --analytics-start takes earliest, latest or an RFC 3339 time, applies to
// the analytics projector only, and refuses anything else.
func TestAnalyticsStartFlag(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (*Settings, error) {
		s := &Settings{}
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		BindFlags(fs, s)
		return s, fs.Parse(args)
	}
	s, err := parse()
	require.NoError(t, err)
	require.True(t, s.projectorStart("analytics").Earliest(), "the default is the beginning of the log")

	s, err = parse("--analytics-start=latest")
	require.NoError(t, err)
	require.Equal(t, projectors.StartLatest, s.projectorStart("analytics"))
	require.True(t, s.projectorStart("docview").Earliest())
	require.True(t, s.projectorStart("indexer").Earliest())

	s, err = parse("--analytics-start", "2026-01-02T15:04:05Z")
	require.NoError(t, err)
	require.Equal(t, projectors.StartAt(time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)).String(), s.projectorStart("analytics").String())

	_, err = parse("--analytics-start=yesterday")
	require.ErrorContains(t, err, "earliest, latest or an RFC 3339 time")
}
