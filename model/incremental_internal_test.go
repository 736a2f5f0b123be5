package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeptPrefixAtACheckpoint removes the last member of a state whose
// encoding, once it is gone, ends exactly at a digest checkpoint: the
// checkpoint the previous encoding saved there covers the comma the removal
// dropped, so the digest must not resume from it.
func TestKeptPrefixAtACheckpoint(t *testing.T) {
	t.Parallel()
	// {"a":"…"} is the padding's length plus 8 bytes.
	pad := strings.Repeat("p", checkpointBytes-8)
	before := map[string]any{"a": pad, "b": 1.0}
	prev, err := encodeState(nil, before, nil, 0)
	require.NoError(t, err)
	require.NotNil(t, prev.node, "a state this large is indexed")

	after := map[string]any{"a": pad}
	next, err := encodeState(prev, after, newTrie([]Path{{"b"}}), len(prev.enc))
	require.NoError(t, err)
	require.Len(t, next.enc, checkpointBytes)

	full, err := Canonical(after)
	require.NoError(t, err)
	require.Equal(t, string(full), string(next.enc))
	require.Equal(t, HashBytes(full), next.hash)
}
