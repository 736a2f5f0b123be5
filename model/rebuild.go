package model

import (
	"context"
	"errors"
	"fmt"
	"math"

	oplog "github.com/doclog/doclog/log"
)

// DefaultKeyframeInterval is how many revisions apart a small stream's
// keyframes are unless configured otherwise: short enough that a cold load
// or a read at a past revision replays at most that many operations, long
// enough that keyframes add little to an append.
const DefaultKeyframeInterval = 10

// KeyframeBytes is the state size that adds one interval to a stream's
// keyframe spacing (KeyframeSpacing). A keyframe costs its whole state
// (checked, sent, compressed, written and kept for good) while an operation
// costs its change, so a fixed spacing makes keyframes most of what a large
// document writes: every tenth operation on a state of 1 MB wrote 1 MB, more
// than half of the pipeline's CPU per operation. Spaced by size, keyframes
// add at most about KeyframeBytes/interval bytes per operation. The price
// is a longer replay when a large stream is loaded cold or read at a past
// revision: up to a spacing of operations, about 0.13 s at 1 MB.
const KeyframeBytes = 128 << 10

// KeyframeSpacing is how many revisions apart the keyframes of a stream
// whose state's canonical JSON is size bytes are: interval, and interval
// more for every whole KeyframeBytes of state. A state below KeyframeBytes
// is spaced by interval alone.
func KeyframeSpacing(interval int64, size int) int64 {
	return interval * (1 + int64(max(size, 0))/KeyframeBytes)
}

// KeyframeDue reports whether a stream that went from revision before to
// revision after, with a state of size bytes at after, owes a keyframe of
// that state: whenever it crossed a multiple of its spacing
// (KeyframeSpacing), so one append of many operations writes one keyframe.
// interval must be positive.
func KeyframeDue(before, after, interval int64, size int) bool {
	n := KeyframeSpacing(interval, size)
	return after > before && after/n != before/n
}

// Head asks StateAt for the state after every operation the log holds.
const Head int64 = math.MaxInt64

// LogReader is what StateAt reads: a stream's nearest keyframe and its
// operations from an index, as the log's plain values. Every log.Store
// satisfies it.
type LogReader interface {
	// NearestKeyframe returns the keyframe with the largest index at or
	// below atOrBelow, and whether there is one.
	NearestKeyframe(ctx context.Context, stream oplog.StreamKey, atOrBelow int64) (oplog.Keyframe, bool, error)
	// ReadStream returns at most limit operations from index from on, in
	// index order.
	ReadStream(ctx context.Context, stream oplog.StreamKey, from int64, limit int) ([]oplog.Operation, error)
}

// Rebuilt is a state StateAt rebuilt and how it got there.
type Rebuilt struct {
	State *StreamState
	// Keyframe is the index of the keyframe the replay started from, -1
	// when it started from index 0.
	Keyframe int64
	// Replayed counts the operations replayed into State, each hash
	// checked.
	Replayed int64
	// Abandoned counts the operations replayed from a keyframe before an
	// operation's skip reached behind it, so the replay started over from
	// index 0.
	Abandoned int64
	// BadKeyframe is why the nearest keyframe was passed over (its state
	// does not hash to its hash), nil when it was not; BadKeyframeIndex is
	// its index.
	BadKeyframe      error
	BadKeyframeIndex int64
}

// StateAt rebuilds a stream's state after its first upTo operations (Head:
// all of them) from the log: from the nearest keyframe at or below index
// upTo-1, its hash checked on load, plus the operations after it; from index
// 0 when there is no keyframe, when it does not verify, or when an
// operation's skip reaches before it. Every operation is replayed with its
// stored hash checked (Replay), read pageSize at a time. documentType names
// the type of a stream rebuilt from index 0; "" takes it from its first
// operation.
//
// A stream with fewer than upTo operations yields the state after the last
// one: the caller decides whether that is an error. On error the counts of
// the Rebuilt still say what was replayed.
func (r *Registry) StateAt(ctx context.Context, src LogReader, stream oplog.StreamKey, documentType string, upTo int64, pageSize int) (Rebuilt, error) {
	res := Rebuilt{Keyframe: -1, BadKeyframeIndex: -1}
	if pageSize < 1 {
		return res, fmt.Errorf("state of %s: page size must be at least 1, not %d", stream, pageSize)
	}
	if upTo > 0 {
		atOrBelow := upTo - 1
		if upTo == Head {
			atOrBelow = Head
		}
		kf, ok, err := src.NearestKeyframe(ctx, stream, atOrBelow)
		if err != nil {
			return res, fmt.Errorf("read the nearest keyframe of %s: %w", stream, err)
		}
		if ok {
			st, err := FromKeyframe(kf)
			if err == nil {
				n, err := r.replayPages(ctx, src, st, upTo, pageSize)
				if err == nil {
					res.State, res.Keyframe, res.Replayed = st, kf.Index, n
					return res, nil
				}
				res.Abandoned = n
				if !errors.As(err, new(*SkipBeforeStart)) {
					return res, err
				}
			} else {
				res.BadKeyframe, res.BadKeyframeIndex = err, kf.Index
			}
		}
	}
	st := NewStreamState(stream, documentType)
	n, err := r.replayPages(ctx, src, st, upTo, pageSize)
	res.Replayed = n
	if err != nil {
		return res, err
	}
	res.State = st
	return res, nil
}

// replayPages reads the operations after st page by page and replays them,
// stopping at upTo operations or at the end of the stream. It returns how
// many it replayed.
func (r *Registry) replayPages(ctx context.Context, src LogReader, st *StreamState, upTo int64, pageSize int) (int64, error) {
	var n int64
	for st.Revision < upTo {
		limit := int(min(upTo-st.Revision, int64(pageSize)))
		ops, err := src.ReadStream(ctx, st.Stream, st.Revision, limit)
		if err != nil {
			return n, fmt.Errorf("read %s from index %d: %w", st.Stream, st.Revision, err)
		}
		if len(ops) == 0 {
			break
		}
		if st.DocumentType == "" {
			st.DocumentType = ops[0].DocumentType
		}
		if err := r.Replay(st, ops); err != nil {
			return n, err
		}
		n += int64(len(ops))
		if len(ops) < limit {
			break
		}
	}
	return n, nil
}
