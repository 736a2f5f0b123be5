// Package place owns placement by timestamp, sync's write path: where the
// operations of a load job (or of a job whose model asks for it) go in a
// stream that already holds operations. It decides which incoming
// operations are replays, whether they continue the stream from its head
// (appended as they are, their hashes verified) or belong before operations
// already stored (merged with the stored tail by timestamp, and the merged
// tail re-appended after the head with a skip spanning what it supersedes),
// and re-derives every resulting state and hash with the document models,
// from the end of a long stream (Stored, Window) rather than all of it.
// It reaches neither Kafka nor Postgres; the rules are in docs/sync.md.
package place

import (
	"cmp"
	"fmt"
	"slices"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// DefaultMaxSkipThreshold is how many stored operations a placement may
// supersede unless configured otherwise: far more than replicas that sync
// every few seconds diverge by, few enough that a placement re-derives a
// bounded tail.
const DefaultMaxSkipThreshold = 1000

// Incoming is one operation to place: a load job's operation as its origin
// stored it, or a new operation of an ordinary job (Index -1, no hash).
type Incoming struct {
	OpID string
	// Index and Skip are the operation's position at its origin; Hash the
	// origin's hash of the state after it, "" when there is none to check.
	Index  int64
	Skip   int64
	Hash   string
	Action oplog.Action
}

// Key orders operations when they are placed: by timestamp, then by opId
// (byte order), so every replica orders the same operations the same way.
type Key struct {
	TimestampUtcMs int64
	OpID           string
}

// Compare orders keys: -1, 0 or 1.
func (k Key) Compare(o Key) int {
	if c := cmp.Compare(k.TimestampUtcMs, o.TimestampUtcMs); c != 0 {
		return c
	}
	return cmp.Compare(k.OpID, o.OpID)
}

func keyOf(op *oplog.Operation) Key { return Key{op.TimestampUtcMs, op.OpID} }
func (in *Incoming) key() Key       { return Key{in.Action.TimestampUtcMs, in.OpID} }

// Entry is one operation of a plan's tail, in the order it is appended:
// an incoming operation, or a stored one the placement moves.
type Entry struct {
	OpID   string
	Action oplog.Action
	// Stored is the operation moved, nil for an incoming one.
	Stored *oplog.Operation
	// Check is the origin's hash the re-derived state must reproduce, ""
	// when the origin's state before it is not this stream's.
	Check string
}

// Plan is where a stream's incoming operations go.
type Plan struct {
	Stream oplog.StreamKey
	// Revision is the stream's revision before the plan: the index the
	// first entry takes.
	Revision int64
	// Base is the index of the first stored operation the plan supersedes,
	// Revision when it supersedes none; Skip = Revision - Base is the skip
	// of the first entry.
	Base int64
	Skip int64
	// Tail is what is appended, in order, from index Revision.
	Tail []Entry
	// Replays are the incoming operations already stored (opIds), and
	// Superseded those the origin's own skips superseded within the load;
	// neither is appended.
	Replays    []string
	Superseded []string
	// Moved counts the stored operations re-appended (reshuffled).
	Moved int
}

// Reshuffles reports whether the plan moves stored operations.
func (p *Plan) Reshuffles() bool { return p.Skip > 0 }

// Stored is what a placement reads of a stream: its operations from index
// From to the head, and what it needs of the ones before them. A long
// stream is read from a window, not from index 0: a placement supersedes
// at most MaxSkipThreshold operations, so what lies further back than the
// threshold's reach only counts through the state it leaves and the
// operation ids it holds.
type Stored struct {
	// From is the index of Ops[0]: 0, or at most head - maxSkip - 1
	// (WindowStart), with the window closed under skips (Extend).
	From int64
	// Ops are the stream's operations from index From on, in index order.
	Ops []oplog.Operation
	// Before is the stream's state after its first From operations; nil
	// when From is 0.
	Before *model.StreamState
	// Held lists, for the incoming operations' ids the stream holds at an
	// index below From, those indexes: replays the window cannot show.
	Held map[string][]int64
}

// Whole is a stream read from index 0.
func Whole(ops []oplog.Operation) Stored { return Stored{Ops: ops} }

// Revision is the stream's revision: the index after the last operation.
func (s *Stored) Revision() int64 { return s.From + int64(len(s.Ops)) }

// op returns the stored operation at an index of the window.
func (s *Stored) op(index int64) *oplog.Operation { return &s.Ops[index-s.From] }

// check refuses a window a placement cannot decide exactly from: one that
// starts within maxSkip+1 operations of the head (the first operation it
// shows could then be superseded by one it does not), or one not closed
// under skips (Extend).
func (s *Stored) check(stream oplog.StreamKey, maxSkip int64) error {
	if s.From == 0 {
		return nil
	}
	if s.From > s.Revision()-maxSkip-1 {
		return fmt.Errorf("place in %s: the operations from index %d are too few for a skip threshold of %d at revision %d", stream, s.From, maxSkip, s.Revision())
	}
	if Extend(s.From, s.Ops) != s.From {
		return fmt.Errorf("place in %s: a skip reaches before index %d, where the operations read start", stream, s.From)
	}
	if s.Before == nil || s.Before.Revision != s.From {
		return fmt.Errorf("place in %s: no state at index %d, where the operations read start", stream, s.From)
	}
	return nil
}

// WindowStart is the index from which a placement in a stream at revision
// rev reads its operations: maxSkip+1 operations behind the head, one more
// than a placement may supersede, so that an operation there sorting after
// the incoming ones shows the shuffle is excessive; 0 for a shorter stream.
func WindowStart(rev, maxSkip int64) int64 { return max(rev-maxSkip-1, 0) }

// Extend returns the index a window read from index from must start at
// instead, given its operations ops (from index from on): from itself when
// no operation of it skips over index from or before it, and the first
// operation is in effect, so that the operations in effect from index from
// on are the same as a replay from index 0 keeps, and a replay from the
// state before index from never reaches behind it. Otherwise the caller
// reads the operations before it back to the index returned, and asks
// again.
func Extend(from int64, ops []oplog.Operation) int64 {
	need := from
	for i := range ops {
		op := &ops[i]
		if op.Skip == 0 {
			continue
		}
		reach := op.Index - op.Skip
		switch {
		case op.Index == from:
			need = min(need, reach)
		case reach == from:
			need = min(need, from-1)
		case reach < from:
			need = min(need, reach)
		}
	}
	return max(need, 0)
}

// Window reads the operations from index from (WindowStart, or a keyframe
// before it) to rev, extended back (Extend) until no skip reaches before the
// first, and returns where they start. read returns the operations with
// indexes in [from, to).
func Window(from, rev int64, read func(from, to int64) ([]oplog.Operation, error)) (int64, []oplog.Operation, error) {
	ops, err := read(from, rev)
	if err != nil {
		return 0, nil, err
	}
	for {
		to := from
		if from = Extend(from, ops); from == to {
			return from, ops, nil
		}
		earlier, err := read(from, to)
		if err != nil {
			return 0, nil, err
		}
		ops = append(earlier, ops...)
	}
}

// Effective returns the positions in ops (a stream from index 0, in index
// order) of the operations a replay keeps: an operation with skip n drops
// the kept operations whose index is in [index-n, index), as
// model.Registry.Replay does.
func Effective(ops []oplog.Operation) []int {
	var eff []int
	for i := range ops {
		eff = keep(eff, ops[i].Index, ops[i].Skip, func(e int) int64 { return ops[e].Index })
		eff = append(eff, i)
	}
	return eff
}

// keep applies the skip of the operation at index to eff, the positions
// kept so far (indexOf gives a position's index).
func keep(eff []int, index, skip int64, indexOf func(int) int64) []int {
	if skip == 0 {
		return eff
	}
	first := index - skip
	kept := eff[:0]
	for _, e := range eff {
		if indexOf(e) < first {
			kept = append(kept, e)
		}
	}
	return kept
}

// Load plans a load job's operations for one stream. stored is the stream
// from index 0 or from a window (Stored); incoming its operations in the
// job, in index order.
// The origin's indexes must be contiguous and start at or before the head
// (*MissingOperationsError); a skip of the origin must not reach before the
// load's first operation. A load that continues the stream from its head
// (its first new operation takes the index the origin gave it, and the
// operation before it, if the load carries it, is this stream's last) is
// appended in the origin's order with every hash checked; any other is
// placed by timestamp. A placement that would supersede more than
// maxSkip stored operations is *ExcessiveShuffleError.
func Load(stream oplog.StreamKey, stored Stored, incoming []Incoming, maxSkip int64) (*Plan, error) {
	if err := stored.check(stream, maxSkip); err != nil {
		return nil, err
	}
	rev := stored.Revision()
	if len(incoming) == 0 {
		return &Plan{Stream: stream, Revision: rev, Base: rev}, nil
	}
	first := incoming[0].Index
	for k := 1; k < len(incoming); k++ {
		if want := first + int64(k); incoming[k].Index != want {
			return nil, &MissingOperationsError{Stream: stream, Revision: rev, Expected: want, Got: incoming[k].Index,
				Reason: fmt.Sprintf("the load's indexes jump from %d to %d", incoming[k-1].Index, incoming[k].Index)}
		}
	}
	if first > rev {
		return nil, &MissingOperationsError{Stream: stream, Revision: rev, Expected: rev, Got: first,
			Reason: fmt.Sprintf("the load starts at index %d and the stream holds %d operations", first, rev)}
	}
	// The origin's own skips, resolved within the load.
	eff := make([]int, 0, len(incoming))
	anySkip := false
	for i := range incoming {
		if s := incoming[i].Skip; s > 0 {
			anySkip = true
			from := incoming[i].Index - s
			if from < first {
				return nil, &MissingOperationsError{Stream: stream, Revision: rev, Expected: from, Got: first,
					Reason: fmt.Sprintf("operation %s at index %d skips %d, reaching index %d before the load's first (%d)", incoming[i].OpID, incoming[i].Index, s, from, first)}
			}
			eff = keep(eff, incoming[i].Index, s, func(e int) int64 { return incoming[e].Index })
		}
		eff = append(eff, i)
	}
	p := &Plan{Stream: stream, Revision: rev, Base: rev}
	live := make(map[int]bool, len(eff))
	for _, e := range eff {
		live[e] = true
	}
	for i := range incoming {
		if !live[i] {
			p.Superseded = append(p.Superseded, incoming[i].OpID)
		}
	}
	storedIDs := make(map[string]bool, len(stored.Ops)+len(stored.Held))
	for i := range stored.Ops {
		storedIDs[stored.Ops[i].OpID] = true
	}
	for id, at := range stored.Held {
		if len(at) > 0 {
			storedIDs[id] = true
		}
	}
	var fresh []int // positions in incoming of the operations to place
	for _, e := range eff {
		if storedIDs[incoming[e].OpID] {
			p.Replays = append(p.Replays, incoming[e].OpID)
			continue
		}
		fresh = append(fresh, e)
	}
	if len(fresh) == 0 {
		return p, nil
	}
	effStored := Effective(stored.Ops)
	if !anySkip && continuesHead(&stored, effStored, incoming, fresh) {
		for _, e := range fresh {
			in := &incoming[e]
			p.Tail = append(p.Tail, Entry{OpID: in.OpID, Action: in.Action, Check: in.Hash})
		}
		return p, nil
	}
	entries := make([]Incoming, len(fresh))
	for k, e := range fresh {
		entries[k] = incoming[e]
		entries[k].Hash = ""
	}
	return p, merge(p, &stored, effStored, entries, maxSkip)
}

// continuesHead reports whether the fresh operations continue the stream
// from its head in key order: the first takes the index the origin gave
// it, every incoming operation before it is stored at its own index, and
// each one's key exceeds the one before it (the stream's last effective
// operation first).
func continuesHead(stored *Stored, eff []int, incoming []Incoming, fresh []int) bool {
	rev := stored.Revision()
	f := fresh[0]
	if incoming[f].Index != rev {
		return false
	}
	for k := range f {
		in := &incoming[k]
		switch {
		case in.Index >= rev:
			return false
		case in.Index < stored.From:
			if !slices.Contains(stored.Held[in.OpID], in.Index) {
				return false
			}
		case stored.op(in.Index).OpID != in.OpID:
			return false
		}
	}
	for k := 1; k < len(fresh); k++ {
		if fresh[k] != fresh[k-1]+1 {
			return false
		}
	}
	var last *Key
	if len(eff) > 0 {
		k := keyOf(&stored.Ops[eff[len(eff)-1]])
		last = &k
	}
	for _, e := range fresh {
		k := incoming[e].key()
		if last != nil && k.Compare(*last) <= 0 {
			return false
		}
		last = &k
	}
	return true
}

// Ordinary plans an ordinary job's new operations for one stream (their
// opIds derived from the job, in action order): appended when they sort
// after the stream's last effective operation, merged by timestamp
// otherwise. Their timestamps must strictly increase
// (*NonMonotonicTimestampsError), so that timestamp order is action order.
func Ordinary(stream oplog.StreamKey, stored Stored, ops []Incoming, maxSkip int64) (*Plan, error) {
	if err := stored.check(stream, maxSkip); err != nil {
		return nil, err
	}
	if i := FirstNonMonotonic(ops); i >= 0 {
		return nil, &NonMonotonicTimestampsError{Stream: stream, OpID: ops[i].OpID, Position: i,
			TimestampUtcMs: ops[i].Action.TimestampUtcMs, Previous: ops[i-1].Action.TimestampUtcMs}
	}
	rev := stored.Revision()
	p := &Plan{Stream: stream, Revision: rev, Base: rev}
	if len(ops) == 0 {
		return p, nil
	}
	entries := slices.Clone(ops)
	for k := range entries {
		entries[k].Hash = ""
	}
	return p, merge(p, &stored, Effective(stored.Ops), entries, maxSkip)
}

// FirstNonMonotonic returns the position of the first operation whose
// timestamp does not strictly exceed every one before it, -1 when they all
// do. The bound is carried forward, so a tie anywhere is caught.
func FirstNonMonotonic(ops []Incoming) int {
	for i := 1; i < len(ops); i++ {
		if ops[i].Action.TimestampUtcMs <= ops[i-1].Action.TimestampUtcMs {
			return i
		}
	}
	return -1
}

// merge places entries by key: the stored effective operations from the
// first one that sorts after the smallest entry are superseded and
// re-appended, merged with the entries, after the head. eff are positions
// in stored.Ops. A window's first operation is in effect and at least
// maxSkip+1 behind the head (Stored.check), so when it sorts after the
// smallest entry the shuffle is excessive wherever the stream before it
// would put the base; and in a stream whose effective operations are in
// key order (every stream placement writes), no operation before the
// window sorts after an entry when one in it does not.
func merge(p *Plan, stored *Stored, eff []int, entries []Incoming, maxSkip int64) error {
	lowest := entries[0].key()
	for k := range entries {
		if kk := entries[k].key(); kk.Compare(lowest) < 0 {
			lowest = kk
		}
	}
	q := len(eff)
	for n, e := range eff {
		if keyOf(&stored.Ops[e]).Compare(lowest) > 0 {
			q = n
			break
		}
	}
	type item struct {
		key Key
		ent Entry
	}
	items := make([]item, 0, len(eff)-q+len(entries))
	if q < len(eff) {
		// A stored skip at or after the base that reaches before it would
		// be superseded with its effect, which the state rebuilt before the
		// base cannot show: the base moves back to where it reaches, and
		// the operations kept from there on are re-appended too.
		base := stored.Ops[eff[q]].Index
		for moved := true; moved && base >= stored.From; {
			moved = false
			for i := base; i < p.Revision; i++ {
				if from := stored.op(i).Index - stored.op(i).Skip; from < base {
					base, moved = from, true
				}
			}
		}
		for q > 0 && stored.Ops[eff[q-1]].Index >= base {
			q--
		}
		p.Base = base
		p.Skip = p.Revision - p.Base
		if p.Skip > maxSkip {
			return &ExcessiveShuffleError{Stream: p.Stream, Revision: p.Revision, Base: p.Base, Skip: p.Skip, Max: maxSkip}
		}
		for _, e := range eff[q:] {
			op := &stored.Ops[e]
			items = append(items, item{keyOf(op), Entry{OpID: op.OpID, Action: op.Action, Stored: op}})
		}
		p.Moved = len(eff) - q
	}
	for k := range entries {
		in := &entries[k]
		items = append(items, item{in.key(), Entry{OpID: in.OpID, Action: in.Action}})
	}
	slices.SortStableFunc(items, func(a, b item) int { return a.key.Compare(b.key) })
	for _, it := range items {
		p.Tail = append(p.Tail, it.ent)
	}
	return nil
}
