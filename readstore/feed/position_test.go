package feed_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/readstore/feed"
)

func TestPositionRoundTrip(t *testing.T) {
	for _, p := range []feed.Position{{}, {Tx: 1, Done: 0}, {Tx: 812345, Done: 3}, {Tx: 9_999_999_999_999_999_999, Done: 999_999_999}} {
		got, err := feed.ParsePosition(p.String())
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	for _, bad := range []string{"", "12", "12.3", "-", "1-", "-1", "+1-2", "1-+2", " 1-2", "1-2 ", "1-2-3", "0x1-2",
		"99999999999999999999-1", "1-1000000000", "1_0-2"} {
		_, err := feed.ParsePosition(bad)
		var pe *feed.PositionError
		require.True(t, errors.As(err, &pe), "%q: %v", bad, err)
		require.Equal(t, bad, pe.Cursor)
	}
}
