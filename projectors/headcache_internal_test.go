package projectors

import (
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

func TestHeadCache(t *testing.T) {
	t.Parallel()
	state := func(id string) *model.StreamState { return model.NewStreamState(globalKey(id), "t") }
	ref := func(i int64) HeadRef { return HeadRef{LastIndex: i, Hash: "h", Version: 1} }

	// Bounded in bytes: three entries of 1,000 canonical bytes fit in
	// 3 × (1,000 + overhead), a fourth evicts the least recently used.
	c := newHeadCache(3 * (1000 + headEntryOverhead))
	for _, id := range []string{"a", "b", "c"} {
		c.put(ref(1), state(id), 1000)
	}
	n, bytes := c.stats()
	require.Equal(t, 3, n)
	require.Equal(t, int64(3*(1000+headEntryOverhead)), bytes)
	c.put(ref(1), state("d"), 1000)
	got := c.take([]oplog.StreamKey{globalKey("a"), globalKey("b"), globalKey("d")})
	require.NotContains(t, got, globalKey("a"), "the oldest entry was evicted")
	require.Contains(t, got, globalKey("b"))
	require.Contains(t, got, globalKey("d"))

	// Taken entries are out until given back.
	require.Empty(t, c.take([]oplog.StreamKey{globalKey("b")}))
	n, bytes = c.stats()
	require.Equal(t, 1, n)
	require.Equal(t, int64(1000+headEntryOverhead), bytes)
	c.giveBack(got)
	n, _ = c.stats()
	require.Equal(t, 3, n)

	// A later head is never replaced by an earlier one given back.
	held := c.take([]oplog.StreamKey{globalKey("b")})
	c.put(ref(5), state("b"), 10)
	c.giveBack(held)
	require.Equal(t, ref(5), c.take([]oplog.StreamKey{globalKey("b")})[globalKey("b")].ref)

	// Replacing an entry keeps the weight right; one heavier than the
	// bound is not held at all.
	c.put(ref(6), state("c"), 500)
	c.put(ref(7), state("c"), 500)
	c.put(ref(8), state("d"), 1<<20)
	n, bytes = c.stats()
	require.Equal(t, 1, n)
	require.Equal(t, int64(500+headEntryOverhead), bytes)

	// Disabled: a nil cache holds nothing and does not fail.
	var off *headCache = newHeadCache(-1)
	require.Nil(t, off)
	off.put(ref(1), state("a"), 10)
	require.Empty(t, off.take([]oplog.StreamKey{globalKey("a")}))
	off.giveBack(nil)
}
