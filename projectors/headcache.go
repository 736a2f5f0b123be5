package projectors

import (
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// headEntryOverhead is what an entry weighs beyond its canonical state:
// the key, the model state's headers and the list links.
const headEntryOverhead = 256

// heldHead is a verified stream state the runner keeps between batches,
// with the head it is the state of.
type heldHead struct {
	ref    HeadRef
	state  *model.StreamState
	weight int64
}

// headCache keeps the verified state of the streams a runner advanced
// last, so that the next batch need not read back and decode the state it
// wrote itself. It trusts nothing: Claim compares each held head with the
// stored one under the stream's lock, and a stream another writer moved
// (a member after a rebalance, another member's reconciler, an operator)
// is read from the database as before. An entry is taken out while a
// batch uses it, because replaying changes it in place and a batch that
// rolls back must leave nothing changed behind; the new state goes in once
// the batch committed. It is bounded by the canonical bytes of its states.
// A nil *headCache holds nothing.
type headCache struct {
	mu       sync.Mutex
	lru      *simplelru.LRU[oplog.StreamKey, *heldHead]
	bytes    int64
	maxBytes int64
}

// newHeadCache returns a cache of at most maxBytes, or nil when maxBytes
// is negative (disabled).
func newHeadCache(maxBytes int64) *headCache {
	if maxBytes < 0 {
		return nil
	}
	c := &headCache{maxBytes: maxBytes}
	// The count bound is the byte bound's business; simplelru wants one.
	c.lru, _ = simplelru.NewLRU(math.MaxInt32, func(_ oplog.StreamKey, h *heldHead) { c.bytes -= h.weight })
	return c
}

// take removes and returns the held heads of the streams.
func (c *headCache) take(keys []oplog.StreamKey) map[oplog.StreamKey]*heldHead {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[oplog.StreamKey]*heldHead{}
	for _, k := range keys {
		if h, ok := c.lru.Peek(k); ok {
			out[k] = h
			c.lru.Remove(k)
		}
	}
	return out
}

// put holds st as the state of its stream at head.
func (c *headCache) put(ref HeadRef, st *model.StreamState, canonicalBytes int) {
	if c == nil || st == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.insertLocked(&heldHead{ref: ref, state: st, weight: int64(canonicalBytes) + headEntryOverhead})
}

// giveBack returns unused entries taken for a batch: they are unchanged.
func (c *headCache) giveBack(held map[oplog.StreamKey]*heldHead) {
	if c == nil || len(held) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range held {
		c.insertLocked(h)
	}
}

// insertLocked holds h unless a later head of its stream is held already
// (the reconciler and a batch may race to put the same stream back), then
// evicts down to the bound.
func (c *headCache) insertLocked(h *heldHead) {
	k := h.state.Stream
	if old, ok := c.lru.Peek(k); ok && old.ref.LastIndex > h.ref.LastIndex {
		return
	}
	c.lru.Remove(k) // Add would replace it without the eviction callback
	if h.weight > c.maxBytes {
		return
	}
	c.lru.Add(k, h)
	c.bytes += h.weight
	for c.bytes > c.maxBytes {
		c.lru.RemoveOldest()
	}
}

// stats returns the number of held streams and their weight.
func (c *headCache) stats() (streams int, bytes int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
