package model

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync/atomic"
	"unsafe"

	oplog "github.com/doclog/doclog/log"
)

// StreamState is the state of one stream (one scope of one document on one
// branch) after its first Revision operations.
//
// Ownership: Apply and Replay mutate a StreamState in place and reducers may
// mutate its State tree, so a StreamState has exactly one owner at a time.
// The executor applies each job to a Clone of the head, and the write cache
// takes the result back after the append commits. A persistent state (its
// last action declared what it touches) is never changed in place where it
// may be shared, so its Clone shares the tree: only the objects Apply copied
// since the last Clone are changed in place again. Anyone else changing
// State must replace it, never change it in place, or the kept canonical
// bytes would no longer match it.
type StreamState struct {
	Stream       oplog.StreamKey
	DocumentType string
	// Revision is the number of operations applied, which is also the index
	// the next operation takes.
	Revision int64
	// Version is the model version State was produced at (for the document
	// scope, the document's version). 0 while the stream is empty.
	Version int
	// State is the scope's JSON tree; nil while the stream is empty.
	State any
	// Hash is the state hash after the last operation, "" while empty.
	Hash string
	// Size is the length of State's canonical JSON, the cache's measure of
	// its weight.
	Size int

	// poisoned marks a state a reducer failed on: it may be half changed.
	poisoned bool
	// canon is State's canonical encoding, kept to make the next hash
	// incremental; nil when unknown. It is valid only while State is the
	// tree it encodes (canon.root), and never changed once made; the
	// StreamStates holding it are counted (Clone, keep, Discard), and the
	// last to let it go gives its buffer back for the next encoding.
	canon *canon
	// persistent marks a State that is never changed in place where it may
	// be shared: Apply copies what an action touches (but what own holds),
	// so a Clone may share the tree.
	persistent bool
	// own is the objects of a persistent State that Apply copied since the
	// tree was last shared, which only this StreamState holds; nil when none.
	own *ownership
	// sp is the open savepoint, which records Apply's changes in place.
	sp *Savepoint
}

// ownership is the set of objects a StreamState's tree holds alone: those
// Apply copied on a declared path since the tree was last shared. A later
// action on the same path changes them in place instead of copying them
// again, so replaying a stream's operations, or applying a job's actions,
// copies each object of a path once rather than once per operation: on a
// state whose root has 12,000 members that copy was most of an operation's
// cost. Clone, which shares the tree, marks the set shared; from then on
// neither side changes any of it in place.
type ownership struct {
	maps map[unsafe.Pointer]struct{}
	// shared is set by Clone, which may run on a state other goroutines
	// read (a cached head), hence atomic.
	shared atomic.Bool
}

// maxOwned bounds an ownership set. Objects a later action removed from
// the tree stay in the set until it is dropped; past this many, the set
// starts again, and the next actions copy their paths once more.
const maxOwned = 4096

// owns reports whether m is in the set.
func (o *ownership) owns(m map[string]any) bool {
	if o == nil || o.shared.Load() {
		return false
	}
	_, ok := o.maps[mapID(m)]
	return ok
}

// add puts m, a copy only this tree holds, in the set.
func (o *ownership) add(m map[string]any) {
	o.maps[mapID(m)] = struct{}{}
}

// ownershipFor returns st's set, a new one when it has none, its set was
// shared, or it grew past maxOwned.
func (s *StreamState) ownershipFor() *ownership {
	if s.own == nil || s.own.shared.Load() || len(s.own.maps) >= maxOwned {
		s.own = &ownership{maps: make(map[unsafe.Pointer]struct{})}
	}
	return s.own
}

// NewStreamState is the state of an empty stream.
func NewStreamState(stream oplog.StreamKey, documentType string) *StreamState {
	return &StreamState{Stream: stream, DocumentType: documentType}
}

// empty reports that no operation is in effect on the stream: none was
// applied, or a skip superseded every one (the revision counts them all, so
// the hash, "" until an operation is in effect, is what tells).
func (s *StreamState) empty() bool { return s.Revision == 0 || s.Hash == "" }

// Poisoned reports that a reducer failed on this state after it may have
// changed it. A poisoned state must be dropped; Apply refuses it.
func (s *StreamState) Poisoned() bool { return s.poisoned }

// Clone returns a copy the caller owns. A state whose last action declared
// what it touches (ActionSpec.Touches) is persistent: no one changes its tree
// in place, so the copy shares it and costs nothing. Any other state is
// copied deeply.
func (s *StreamState) Clone() *StreamState {
	if s.own != nil {
		s.own.shared.Store(true)
	}
	c := *s
	c.own, c.sp = nil, nil
	switch {
	case !s.persistent:
		c.State, c.canon = CloneJSON(s.State), nil
	case s.canon != nil && !s.canon.retain():
		c.canon = nil // no holder is left: its buffer may be another's
	}
	return &c
}

// Discard tells the state that its holder is done with it: its kept
// encoding's buffer may then be reused once no clone holds it either. The
// caller must hold the only reference to s and not use it afterwards.
// Dropping a state without Discard is always safe; it only forgoes that
// reuse.
func (s *StreamState) Discard() {
	if s.canon != nil {
		s.canon.release()
		s.canon = nil
	}
}

// validCanon returns the kept encoding when it still encodes State.
func (s *StreamState) validCanon() *canon {
	if s.canon == nil {
		return nil
	}
	if m, ok := s.State.(map[string]any); !ok || !sameMap(m, s.canon.root) {
		return nil
	}
	return s.canon
}

// Canonical returns the RFC 8785 canonical JSON of State: the bytes kept
// from the last hash when they still encode it, which the caller must not
// change, else a fresh encoding.
func (s *StreamState) Canonical() ([]byte, error) {
	if c := s.validCanon(); c != nil {
		c.exported.Store(true)
		return c.enc, nil
	}
	return Canonical(s.State)
}

// Keyframe renders the state as a keyframe labelled by the index of its last
// operation (Revision-1).
func (s *StreamState) Keyframe() (oplog.Keyframe, error) {
	if s.Revision == 0 {
		return oplog.Keyframe{}, fmt.Errorf("keyframe of %s: the stream is empty", s.Stream)
	}
	b, err := s.Canonical()
	if err != nil {
		return oplog.Keyframe{}, fmt.Errorf("keyframe of %s: %w", s.Stream, err)
	}
	return oplog.Keyframe{
		Stream:       s.Stream,
		DocumentType: s.DocumentType,
		Index:        s.Revision - 1,
		Version:      s.Version,
		State:        b,
		Hash:         s.Hash,
	}, nil
}

// FromKeyframe rebuilds a state from a keyframe and checks that the decoded
// state still hashes to the keyframe's hash, so a damaged keyframe is never
// trusted.
func FromKeyframe(kf oplog.Keyframe) (*StreamState, error) {
	v, err := DecodeJSON(kf.State)
	if err != nil {
		return nil, fmt.Errorf("decode keyframe of %s at index %d: %w", kf.Stream, kf.Index, err)
	}
	c, err := encodeState(nil, v, nil, len(kf.State))
	if err != nil {
		return nil, fmt.Errorf("hash keyframe of %s at index %d: %w", kf.Stream, kf.Index, err)
	}
	if c.hash != kf.Hash {
		return nil, &HashMismatch{Stream: kf.Stream, Index: kf.Index, Expected: kf.Hash, Actual: c.hash}
	}
	st := &StreamState{
		Stream:       kf.Stream,
		DocumentType: kf.DocumentType,
		Revision:     kf.Index + 1,
		Version:      kf.Version,
		State:        v,
		Hash:         c.hash,
		Size:         len(c.enc),
	}
	st.keep(c)
	return st, nil
}

// keep holds c as State's encoding when State is an object (the only
// root whose identity tells that it is unchanged).
func (s *StreamState) keep(c *canon) {
	if s.canon != nil {
		s.canon.release()
	}
	s.canon = nil
	if c.root != nil {
		s.canon = c
	} else {
		c.release()
	}
}

// sameMap reports whether a and b are the same map, not equal ones.
func sameMap(a, b map[string]any) bool { return mapID(a) == mapID(b) }

// mapID is m's identity: the same for every reference to one map.
func mapID(m map[string]any) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }

// CloneJSON deep-copies a JSON tree.
func CloneJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = CloneJSON(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = CloneJSON(e)
		}
		return a
	}
	// Scalars are immutable values.
	return v
}

// EqualJSON compares two JSON trees by value (numbers numerically, objects
// regardless of key order).
func EqualJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !EqualJSON(e, f) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !EqualJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	fa, oka := toFloat(a)
	fb, okb := toFloat(b)
	return oka && okb && fa == fb
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// Header is a document's header as readers see it: the fields every
// document has, whatever its model.
type Header struct {
	ID                string           `json:"id"`
	DocumentType      string           `json:"documentType"`
	Slug              string           `json:"slug"`
	Name              string           `json:"name"`
	CreatedAtUtcMs    int64            `json:"createdAtUtcMs"`
	LastModifiedUtcMs int64            `json:"lastModifiedUtcMs"`
	Revision          map[string]int64 `json:"revision"`
	Version           int              `json:"version"`
}

// NewHeader assembles a header from the document scope's info and the
// document's revisions per scope.
func NewHeader(info DocumentInfo, revs oplog.Revisions) Header {
	rev := make(map[string]int64, len(revs.Revision))
	for k, v := range revs.Revision {
		rev[k] = v
	}
	return Header{
		ID:                info.ID,
		DocumentType:      info.DocumentType,
		Slug:              info.Slug,
		Name:              info.Name,
		CreatedAtUtcMs:    info.CreatedAtUtcMs,
		LastModifiedUtcMs: revs.LatestTimestamp,
		Revision:          rev,
		Version:           info.Version,
	}
}
