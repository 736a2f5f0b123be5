package projectors

import (
	"container/list"
	"hash/maphash"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/record"
)

// DefaultSharedDecodeBytes bounds the records a SharedDecode holds, in
// bytes of their values: a few polls' worth of small records, so that a
// runner a poll or two behind the first still finds them.
const DefaultSharedDecodeBytes = 8 << 20

// SharedDecode lets the runners of one process decode each write-ready
// record once between them. Every runner consumes the whole topic in its
// own group, so without it each decodes every record itself: with the
// document view and the relationship index in one process, decoding was
// over half of the runners' CPU (docs/benchmarks.md).
//
// The first runner to meet a record decodes it and keeps the result for
// the others; a runner that comes too late (its entry evicted) decodes it
// itself. An entry is dropped once every runner sharing it took it, or,
// oldest first, when the entries pass their byte bound. A record is known
// by its topic, partition and offset and the hash of its value, so a topic
// deleted and made again under the same name is never answered from what
// the old one held. The decoded record is shared: its readers must not
// modify it, and the runner does not.
type SharedDecode struct {
	readers  int
	maxBytes int
	seed     maphash.Seed

	mu      sync.Mutex
	entries map[decodedKey]*list.Element // of *decodedEntry
	order   list.List                    // oldest first, for eviction
	bytes   int
}

type decodedKey struct {
	topic     string
	partition int32
	offset    int64
}

type decodedEntry struct {
	key   decodedKey
	sum   uint64 // the value's hash
	size  int
	wr    *record.WriteReady
	err   error
	taken int // by how many readers so far
}

// NewSharedDecode returns a SharedDecode for readers runners (at least
// two, or sharing saves nothing), holding at most maxBytes of record
// values (0: DefaultSharedDecodeBytes).
func NewSharedDecode(readers, maxBytes int) *SharedDecode {
	if maxBytes <= 0 {
		maxBytes = DefaultSharedDecodeBytes
	}
	return &SharedDecode{readers: readers, maxBytes: maxBytes, seed: maphash.MakeSeed(), entries: map[decodedKey]*list.Element{}}
}

// decode returns the record decoded, by this call or an earlier one of
// another runner.
func (s *SharedDecode) decode(rec *kgo.Record) (*record.WriteReady, error) {
	if s == nil || s.readers < 2 {
		return record.DecodeWriteReady(rec)
	}
	key := decodedKey{topic: rec.Topic, partition: rec.Partition, offset: rec.Offset}
	sum := maphash.Bytes(s.seed, rec.Value)
	s.mu.Lock()
	if el, ok := s.entries[key]; ok {
		if e := el.Value.(*decodedEntry); e.sum == sum && e.size == len(rec.Value) {
			e.taken++
			if e.taken >= s.readers {
				s.drop(el)
			}
			s.mu.Unlock()
			return e.wr, e.err
		}
	}
	s.mu.Unlock()

	wr, err := record.DecodeWriteReady(rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.entries[key]; ok {
		s.drop(old) // another runner decoded it meanwhile, or a different value
	}
	e := &decodedEntry{key: key, sum: sum, size: len(rec.Value), wr: wr, err: err, taken: 1}
	s.entries[key] = s.order.PushBack(e)
	s.bytes += e.size
	for s.bytes > s.maxBytes {
		s.drop(s.order.Front())
	}
	return wr, err
}

// drop removes an entry; the caller holds mu.
func (s *SharedDecode) drop(el *list.Element) {
	e := s.order.Remove(el).(*decodedEntry)
	delete(s.entries, e.key)
	s.bytes -= e.size
}
