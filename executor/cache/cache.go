// Package cache is the executor's write cache: the head state of recently
// used streams, so that applying a job costs no database read. It owns the
// LRU over streams (bounded in bytes and in count), the cold-miss rebuild
// (model.StateAt: nearest keyframe, then the operations since; else from
// index 0) with a keyframe persisted after a long one, and dropping every
// stream a Kafka partition loaded when the partition is revoked.
//
// Ownership: held heads are never changed in place. LoadShared hands out
// the held head itself, for a caller that copies before it applies anything
// (the executor copies per job, so that a failed job can be undone, which
// makes a second copy per batch pure waste). Once the append has committed,
// the new head comes back with Put (no copy: the cache takes the value
// over). A batch that fails to append simply does not Put; one that lost a
// conflict calls Invalidate so the next LoadShared reads the log.
//
// The cache trusts its heads: a head made stale by another writer (a member
// left behind by a rebalance) is caught by the append's expected revision,
// never by a read.
package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// EntryOverhead is the weight added to each held snapshot on top of its
// state's canonical JSON length: the map, list and struct headers around it.
// The byte bound counts canonical JSON, not Go heap; see docs/benchmarks.md
// for the measured ratio.
const EntryOverhead = 512

// Config configures a Cache. The zero value of each field means its default.
type Config struct {
	// MaxStreams bounds the number of streams held. Default 10000.
	MaxStreams int
	// MaxBytes bounds the summed weight of the held snapshots (canonical
	// JSON length plus EntryOverhead each). Default 64 MiB, about 520 MiB
	// of Go heap: a held head takes ~8 heap bytes per canonical byte (its
	// tree, its kept canonical bytes and their index; docs/benchmarks.md).
	MaxBytes int64
	// KeyframeInterval is the streams' keyframe interval (model.KeyframeDue):
	// a cold miss that replayed at least a keyframe spacing of operations
	// (model.KeyframeSpacing) persists a keyframe at the head. Default
	// model.DefaultKeyframeInterval.
	KeyframeInterval int64
	// ReadPageSize is how many operations one ReadStream call fetches during
	// a rebuild. Default 1000.
	ReadPageSize int
	// NoKeyframeOnRebuild turns off persisting a keyframe at the head after
	// a cold miss that replayed at least a keyframe spacing of operations (a
	// stream written before keyframes existed, or one whose keyframe was
	// bad). Default false: such keyframes are written.
	NoKeyframeOnRebuild bool

	// historySize is how many older snapshots of a stream are kept besides
	// its head. The executor reads only heads, so nothing but the tests'
	// StateAt reads past ones, and no setting exposes it (export_test.go).
	historySize int
}

// Defaults.
const (
	DefaultMaxStreams   = 10000
	DefaultMaxBytes     = 64 << 20
	DefaultReadPageSize = 1000
)

// WithDefaults returns the config with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.KeyframeInterval == 0 {
		c.KeyframeInterval = model.DefaultKeyframeInterval
	}
	if c.ReadPageSize == 0 {
		c.ReadPageSize = DefaultReadPageSize
	}
	return c
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.MaxStreams < 1:
		return fmt.Errorf("cache config: MaxStreams must be at least 1, not %d", c.MaxStreams)
	case c.MaxBytes < EntryOverhead:
		return fmt.Errorf("cache config: MaxBytes must be at least %d, not %d", EntryOverhead, c.MaxBytes)
	case c.KeyframeInterval < 1:
		return fmt.Errorf("cache config: KeyframeInterval must be at least 1, not %d", c.KeyframeInterval)
	case c.historySize < 0:
		return fmt.Errorf("cache config: the history size must not be negative, not %d", c.historySize)
	case c.ReadPageSize < 1:
		return fmt.Errorf("cache config: ReadPageSize must be at least 1, not %d", c.ReadPageSize)
	}
	return nil
}

// Cache is the write cache. It is safe for concurrent use by the workers of
// several partitions.
type Cache struct {
	store oplog.Store
	reg   *model.Registry
	cfg   Config

	mu          sync.Mutex
	entries     map[oplog.StreamKey]*list.Element
	lru         *list.List // of *entry, most recently used first
	bytes       int64
	byPartition map[int32]map[oplog.StreamKey]struct{}

	hits, misses, evictions            atomic.Int64
	kfRebuilds, fullRebuilds, replayed atomic.Int64
	badKeyframes, keyframesWritten     atomic.Int64
}

type entry struct {
	key       oplog.StreamKey
	partition int32
	head      *model.StreamState
	history   []*model.StreamState // oldest first, at most historySize
	weight    int64
}

func weightOf(st *model.StreamState) int64 { return int64(st.Size) + EntryOverhead }

// New returns a cache over store, rebuilding states with reg's models.
func New(store oplog.Store, reg *model.Registry, cfg Config) (*Cache, error) {
	if store == nil || reg == nil {
		return nil, errors.New("new write cache: store and registry are required")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Cache{
		store:       store,
		reg:         reg,
		cfg:         cfg,
		entries:     map[oplog.StreamKey]*list.Element{},
		lru:         list.New(),
		byPartition: map[int32]map[oplog.StreamKey]struct{}{},
	}, nil
}

// LoadShared returns a stream's head state: the held head itself, which the
// caller must not change — it copies before applying anything, and gives
// the result back with Put. On a miss it rebuilds the head from the nearest
// keyframe and the operations since (or from index 0) and holds it, tagged
// with partition. documentType names the type of a stream that turns out to
// be empty.
func (c *Cache) LoadShared(ctx context.Context, partition int32, stream oplog.StreamKey, documentType string) (*model.StreamState, error) {
	c.mu.Lock()
	if el, ok := c.entries[stream]; ok {
		c.lru.MoveToFront(el)
		head := el.Value.(*entry).head
		c.mu.Unlock()
		c.hits.Add(1)
		return head, nil
	}
	c.mu.Unlock()
	c.misses.Add(1)
	st, err := c.rebuild(ctx, stream, documentType, model.Head)
	if err != nil {
		return nil, err
	}
	c.insert(partition, st)
	return st, nil
}

// Put makes st the head of its stream, tagged with partition. The cache takes
// st over: the caller must not touch it afterwards. A state older than the
// held head, or a poisoned one, is ignored.
func (c *Cache) Put(partition int32, st *model.StreamState) {
	if st == nil || st.Poisoned() {
		return
	}
	c.insert(partition, st)
}

func (c *Cache) insert(partition int32, st *model.StreamState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[st.Stream]; ok {
		e := el.Value.(*entry)
		c.lru.MoveToFront(el)
		if st.Revision < e.head.Revision {
			return
		}
		c.bytes -= e.weight
		if c.cfg.historySize > 0 && st.Revision > e.head.Revision {
			e.history = append(e.history, e.head)
			if over := len(e.history) - c.cfg.historySize; over > 0 {
				clear(e.history[:over])
				e.history = e.history[over:]
			}
		}
		e.head = st
		e.weight = weightOf(st)
		for _, h := range e.history {
			e.weight += weightOf(h)
		}
		c.bytes += e.weight
		if e.partition != partition {
			c.untag(e)
			e.partition = partition
			c.tag(e)
		}
	} else {
		e := &entry{key: st.Stream, partition: partition, head: st, weight: weightOf(st)}
		c.entries[st.Stream] = c.lru.PushFront(e)
		c.bytes += e.weight
		c.tag(e)
	}
	c.evictLocked()
}

func (c *Cache) tag(e *entry) {
	set := c.byPartition[e.partition]
	if set == nil {
		set = map[oplog.StreamKey]struct{}{}
		c.byPartition[e.partition] = set
	}
	set[e.key] = struct{}{}
}

func (c *Cache) untag(e *entry) {
	if set := c.byPartition[e.partition]; set != nil {
		delete(set, e.key)
		if len(set) == 0 {
			delete(c.byPartition, e.partition)
		}
	}
}

func (c *Cache) removeLocked(el *list.Element) {
	e := c.lru.Remove(el).(*entry)
	delete(c.entries, e.key)
	c.untag(e)
	c.bytes -= e.weight
}

// evictLocked drops least recently used streams until both bounds hold. A
// single state heavier than MaxBytes is dropped too: the bound is a promise.
func (c *Cache) evictLocked() {
	for c.lru.Len() > 0 && (c.lru.Len() > c.cfg.MaxStreams || c.bytes > c.cfg.MaxBytes) {
		c.removeLocked(c.lru.Back())
		c.evictions.Add(1)
	}
}

// Invalidate drops a stream, so its next LoadShared reads the log (after an append
// lost a conflict on it).
func (c *Cache) Invalidate(stream oplog.StreamKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[stream]; ok {
		c.removeLocked(el)
	}
}

// DropPartition drops every stream that partition loaded or put (on revoke
// or loss of the partition) and reports how many.
func (c *Cache) DropPartition(partition int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	set := c.byPartition[partition]
	n := 0
	for key := range set {
		if el, ok := c.entries[key]; ok {
			c.removeLocked(el)
			n++
		}
	}
	delete(c.byPartition, partition)
	return n
}

// rebuild computes a stream's state after at most upTo operations
// (model.Head: the head) from the log.
func (c *Cache) rebuild(ctx context.Context, stream oplog.StreamKey, documentType string, upTo int64) (*model.StreamState, error) {
	res, err := c.reg.StateAt(ctx, c.store, stream, documentType, upTo, c.cfg.ReadPageSize)
	c.replayed.Add(res.Replayed + res.Abandoned)
	if res.BadKeyframe != nil {
		c.badKeyframes.Add(1)
	}
	if err != nil {
		return nil, fmt.Errorf("rebuild %s: %w", stream, err)
	}
	if res.Keyframe >= 0 {
		c.kfRebuilds.Add(1)
	} else {
		c.fullRebuilds.Add(1)
	}
	c.maybeKeyframe(ctx, res.State, res.Replayed, upTo)
	return res.State, nil
}

// maybeKeyframe persists a keyframe at the head after a long rebuild, so the
// next cold miss of the stream is short. A keyframe states a fact about an
// index that never changes, so writing it outside an append is safe; failing
// to write it costs only speed.
func (c *Cache) maybeKeyframe(ctx context.Context, st *model.StreamState, replayed int64, upTo int64) {
	if c.cfg.NoKeyframeOnRebuild || upTo != model.Head || replayed < model.KeyframeSpacing(c.cfg.KeyframeInterval, st.Size) || st.Revision == 0 {
		return
	}
	kf, err := st.Keyframe()
	if err != nil {
		return
	}
	if c.store.PutKeyframe(ctx, kf) == nil {
		c.keyframesWritten.Add(1)
	}
}
