package cache

import (
	"context"
	"fmt"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// What the tests observe of a cache beyond the executor's interface: a
// private copy of a head, the state at a past revision (which reads the
// history ring), the effective configuration and the counters.

// Config returns the effective configuration.
func (c *Cache) Config() Config { return c.cfg }

// WithHistorySize returns the config keeping n older snapshots of each stream
// besides its head, which StateAt serves without reading the log.
func (c Config) WithHistorySize(n int) Config {
	c.historySize = n
	return c
}

// Stats are the cache's counters since it was created.
type Stats struct {
	Streams int   // streams held now
	Bytes   int64 // weight held now
	// Hits and Misses count loads.
	Hits, Misses int64
	// Evictions counts streams dropped to stay within the bounds.
	Evictions int64
	// KeyframeRebuilds and FullRebuilds count rebuilds that started from a
	// keyframe and from index 0.
	KeyframeRebuilds, FullRebuilds int64
	// OperationsReplayed counts operations read and replayed by rebuilds.
	OperationsReplayed int64
	// BadKeyframes counts keyframes that did not verify and were passed over.
	BadKeyframes int64
	// KeyframesWritten counts keyframes persisted after long rebuilds.
	KeyframesWritten int64
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	streams, bytes := c.lru.Len(), c.bytes
	c.mu.Unlock()
	return Stats{
		Streams: streams, Bytes: bytes,
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
		KeyframeRebuilds: c.kfRebuilds.Load(), FullRebuilds: c.fullRebuilds.Load(),
		OperationsReplayed: c.replayed.Load(), BadKeyframes: c.badKeyframes.Load(),
		KeyframesWritten: c.keyframesWritten.Load(),
	}
}

// Load is LoadShared with a private copy of the head, which the caller owns
// and may apply actions to.
func (c *Cache) Load(ctx context.Context, partition int32, stream oplog.StreamKey, documentType string) (*model.StreamState, error) {
	st, err := c.LoadShared(ctx, partition, stream, documentType)
	if err != nil {
		return nil, err
	}
	// Held heads are never mutated (Put hands over a fresh value), so the
	// copy can be made outside the lock.
	return st.Clone(), nil
}

// StateAt returns a private copy of a stream's state after its first
// revision operations: from the held head or history when they have it, else
// rebuilt from the nearest keyframe at or below it. It does not change what
// the cache holds.
func (c *Cache) StateAt(ctx context.Context, stream oplog.StreamKey, documentType string, revision int64) (*model.StreamState, error) {
	if revision < 0 {
		return nil, fmt.Errorf("state of %s at revision %d: revision must not be negative", stream, revision)
	}
	c.mu.Lock()
	if el, ok := c.entries[stream]; ok {
		e := el.Value.(*entry)
		for _, s := range append([]*model.StreamState{e.head}, e.history...) {
			if s.Revision == revision {
				c.mu.Unlock()
				return s.Clone(), nil
			}
		}
	}
	c.mu.Unlock()
	st, err := c.rebuild(ctx, stream, documentType, revision)
	if err != nil {
		return nil, err
	}
	if st.Revision != revision {
		return nil, fmt.Errorf("state of %s at revision %d: the stream has only %d operations", stream, revision, st.Revision)
	}
	return st, nil
}
