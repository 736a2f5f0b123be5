package projectors

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// writeReadyAt is a valid write-ready record of document doc at the
// topic's partition 0, offset offset.
func writeReadyAt(t *testing.T, doc string, offset int64) *kgo.Record {
	t.Helper()
	k := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	const job = "0194b1c2-0000-7000-8000-000000000001"
	w := &record.WriteReady{
		JobID: job, DocumentID: doc, DocumentType: "doclog/json", Branch: oplog.DefaultBranch,
		Streams:          []record.StreamWrite{{StreamRange: oplog.StreamRange{Stream: k, FromIndex: 0, ToIndex: 0}, Hashes: []string{"h0"}}},
		ConsistencyToken: oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{{DocumentID: doc, Scope: k.Scope, Branch: k.Branch, Index: 0}}},
		Operations: []oplog.Operation{{OpID: "5b1c3d1e-0000-5000-8000-000000000001", JobID: job, DocumentID: doc, DocumentType: "doclog/json",
			Scope: k.Scope, Branch: k.Branch, Hash: "h0", Version: 1,
			Action: oplog.Action{ID: "a-1", Type: "MERGE_PATCH", Scope: k.Scope, Input: []byte(`{"n":1}`)}}},
	}
	rec, err := record.NewWriteReadyRecord("write-ready", w, 0)
	require.NoError(t, err)
	rec.Partition, rec.Offset = 0, offset
	return rec
}

// The runners sharing a SharedDecode get one decoding of a record between
// them; a record of the same coordinates with another value (a topic made
// again) is decoded anew; the bound evicts the oldest entries.
func TestSharedDecode(t *testing.T) {
	t.Parallel()
	s := NewSharedDecode(2, 0)
	rec := writeReadyAt(t, "doc-1", 7)
	first, err := s.decode(rec)
	require.NoError(t, err)
	second, err := s.decode(rec)
	require.NoError(t, err)
	require.Same(t, first, second, "the second reader takes the first one's decoding")
	require.Empty(t, s.entries, "dropped once both readers took it")
	third, err := s.decode(rec)
	require.NoError(t, err)
	require.NotSame(t, first, third, "a third meeting (a redelivery) decodes again")

	other := writeReadyAt(t, "doc-2", 8)
	_, err = s.decode(other)
	require.NoError(t, err)
	again := writeReadyAt(t, "doc-3", 8) // offset 8 again, another value
	wr, err := s.decode(again)
	require.NoError(t, err)
	require.Equal(t, "doc-3", wr.DocumentID, "a different value at the same offset is decoded, not taken")

	// An undecodable record's error is shared like a decoding.
	bad := &kgo.Record{Topic: "write-ready", Offset: 9, Value: []byte(`{"schema":`), Headers: rec.Headers}
	_, err1 := s.decode(bad)
	_, err2 := s.decode(bad)
	require.Error(t, err1)
	require.Same(t, err1, err2)

	// Bounded by the values' bytes: the oldest go first.
	small := NewSharedDecode(2, 3*len(rec.Value))
	for i := range int64(10) {
		_, err := small.decode(writeReadyAt(t, "doc-1", i))
		require.NoError(t, err)
	}
	require.LessOrEqual(t, small.bytes, 3*len(rec.Value))
	require.Len(t, small.entries, 3)
	for i := range int64(7) {
		require.NotContains(t, small.entries, decodedKey{topic: "write-ready", offset: i}, "offset %d was evicted", i)
	}
	require.Equal(t, len(small.entries), small.order.Len(), "the eviction order holds the entries and no more")

	// One reader, or none: nothing is kept.
	alone := NewSharedDecode(1, 0)
	_, err = alone.decode(rec)
	require.NoError(t, err)
	require.Empty(t, alone.entries)
	var none *SharedDecode
	wr, err = none.decode(rec)
	require.NoError(t, err)
	require.Equal(t, "doc-1", wr.DocumentID)
}

// Runners decoding the same records at once each get every record right.
func TestSharedDecodeConcurrent(t *testing.T) {
	t.Parallel()
	s := NewSharedDecode(3, 0)
	recs := make([]*kgo.Record, 200)
	for i := range recs {
		recs[i] = writeReadyAt(t, fmt.Sprintf("doc-%d", i), int64(i))
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for i, rec := range recs {
				wr, err := s.decode(rec)
				if err != nil || wr.DocumentID != fmt.Sprintf("doc-%d", i) {
					t.Errorf("record %d: %v, %+v", i, err, wr)
				}
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	for _, el := range s.entries {
		total += el.Value.(*decodedEntry).size
	}
	require.Equal(t, total, s.bytes, "the byte count matches the entries")
}
