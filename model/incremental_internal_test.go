package model

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"unsafe"

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

// TestEncodingBuffersAreReused applies changes to one large state in place,
// as a replay does: the buffer of an encoding its state has let go of is
// the next encoding's, while one a clone still holds, or one handed out by
// Canonical, is never written again.
func TestEncodingBuffersAreReused(t *testing.T) {
	t.Parallel()
	state := map[string]any{}
	for i := range 4000 {
		state[fmt.Sprintf("record-%05d", i)] = map[string]any{"n": float64(i), "title": "a record of moderate length"}
	}
	st := &StreamState{State: state, persistent: true}
	c, err := encodeState(nil, state, nil, 0)
	require.NoError(t, err)
	st.keep(c)
	change := func(i int) {
		t.Helper()
		k := fmt.Sprintf("record-%05d", (i*37)%4000)
		next := maps.Clone(st.State.(map[string]any))
		next[k] = map[string]any{"n": float64(-i)}
		c, err := encodeState(st.validCanon(), next, newTrie([]Path{{k}}), st.Size)
		require.NoError(t, err)
		st.State, st.Size = next, len(c.enc)
		st.keep(c)
		full, err := Canonical(next)
		require.NoError(t, err)
		require.Equal(t, string(full), string(st.canon.enc), "change %d", i)
		require.Equal(t, HashBytes(full), c.hash, "change %d", i)
	}
	seen := map[*byte]bool{}
	reused := 0
	for i := range 30 {
		change(i)
		p := unsafe.SliceData(st.canon.enc)
		if seen[p] {
			reused++
		}
		seen[p] = true
	}
	require.Positive(t, reused, "no encoding reused a buffer its state had let go of")

	exported, err := st.Canonical()
	require.NoError(t, err)
	want := string(exported)
	for i := range 10 {
		change(100 + i)
	}
	require.Equal(t, want, string(exported), "bytes handed out by Canonical were written again")

	clone := st.Clone()
	for i := range 10 {
		change(200 + i)
	}
	full, err := Canonical(clone.State)
	require.NoError(t, err)
	require.Equal(t, string(full), string(clone.canon.enc), "the encoding a clone holds was written again")

	// Once the clone is discarded too, a later encoding may take its buffer.
	clone.Discard()
	require.Nil(t, clone.canon)
}
