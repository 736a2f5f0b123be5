package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/log/postgres"
)

// --executor-copy-threshold reaches postgres.WithCopyThreshold: unset is the
// log's default, a negative value is its "never" (0), and the rest as given.
func TestCopyThreshold(t *testing.T) {
	t.Parallel()
	for set, want := range map[int]int{0: postgres.DefaultCopyThreshold, -1: 0, -100: 0, 1: 1, 4096: 4096} {
		require.Equal(t, want, Tuning{CopyThreshold: set}.copyThreshold(), "CopyThreshold %d", set)
	}
}
