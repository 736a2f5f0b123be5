package pgproj

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTripBoundsParameterBytes(t *testing.T) {
	small := queued{args: []any{"p", []string{"a", "b"}, 7}}
	half := queued{args: []any{strings.Repeat("x", roundTripBytes/2)}}
	whole := queued{args: []any{[]byte(strings.Repeat("x", roundTripBytes+1))}}
	many := queued{args: []any{[]string{strings.Repeat("x", roundTripBytes/2), strings.Repeat("x", roundTripBytes/2)}}}

	require.Equal(t, 3, roundTrip([]queued{small, small, small}), "small writes share one round trip")
	require.Equal(t, 2, roundTrip([]queued{half, half, half}), "two halves fit, the third waits")
	require.Equal(t, 1, roundTrip([]queued{whole, small}), "a write past the bound goes alone")
	require.Equal(t, 1, roundTrip([]queued{small, whole}), "a write past the bound waits for the next")
	require.Equal(t, 1, roundTrip([]queued{many, small, small}), "the strings of an array count")
	require.Equal(t, 2*(roundTripBytes/2)+1, argBytes([]any{many.args[0], "x", 12, nil}))
}
