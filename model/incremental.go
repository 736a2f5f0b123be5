package model

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
)

// Incremental hashing. The hash is SHA-256 over the canonical JSON of the
// whole state, so every operation must produce those bytes and digest them;
// what it need not do is canonicalise what did not change. A StreamState
// therefore keeps, beside its State, the canonical bytes of that State and
// an index of them (canon): for each object of at least nodeMinBytes, its
// members in RFC 8785 order and where each begins in the bytes. An action
// whose ActionSpec declares the paths it touches (Touches) is applied
// copy-on-write: Apply copies the objects on those paths before the reducer
// runs, so every object off them is the very object the previous state had,
// and the new bytes are the old ones with only the touched members
// re-encoded, the runs of members between them copied. SHA-256 resumes from
// a saved state of the digest at the last checkpoint (every checkpointBytes)
// before the first changed byte, so the bytes before a change are not
// digested again.
//
// Soundness rests on one rule: a state that carries canon (or was shared
// by Clone) is never changed in place outside the declared paths. Apply
// keeps it: a declared action works on copies of its paths, and an
// undeclared one (or an upgrade) first takes a deep copy when the tree may be
// shared, and drops canon before the reducer runs, so the next hash is a
// full one. The property tests check that the incremental hash equals a
// full recomputation after random changes, clones, replays and reloads.

const (
	// nodeMinBytes is the size from which an object's members are indexed:
	// a smaller object is re-encoded whole when touched, which costs less
	// than keeping its index.
	nodeMinBytes = 1024
	// checkpointBytes is the distance between saved digest states.
	checkpointBytes = 16 << 10
)

// Path names a member of the state by its object keys from the root. The
// empty path is the whole state. A path that meets an array, or a value
// that is not an object, stops there: that value is touched whole.
type Path []string

// canon is the canonical encoding of one State tree.
type canon struct {
	// root is the State it encodes (a map's identity); canon is valid only
	// while StreamState.State is this very map.
	root map[string]any
	enc  []byte
	node *objNode
	// checkpoints[i] is the marshalled digest state after enc[:(i+1)*checkpointBytes].
	checkpoints [][]byte
	hash        string
	// refs counts the StreamStates that hold this encoding (1 when made;
	// Clone adds one, a holder that replaces it or is discarded takes its
	// one away). At 0 no one holds it, and enc's buffer is reused unless
	// exported.
	refs atomic.Int32
	// exported marks bytes handed out by Canonical: they may be held
	// anywhere, so their buffer is never reused.
	exported atomic.Bool
}

// retain adds a holder, and reports false when the encoding has none left
// (its buffer may be reused already: the new holder must not take it).
func (c *canon) retain() bool {
	for {
		n := c.refs.Load()
		if n <= 0 {
			return false
		}
		if c.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release takes a holder away; the last one gives enc's buffer back unless
// its bytes were handed out.
func (c *canon) release() {
	if c.refs.Add(-1) == 0 && !c.exported.Load() {
		putBuffer(c.enc)
		c.enc = nil
	}
}

// objNode indexes the canonical encoding of one object. Offsets are relative
// to the object's opening brace, so a node stays valid wherever its object
// moves in its parent's encoding.
type objNode struct {
	keys   []string   // RFC 8785 order
	starts []int32    // where member i ("key":value) begins
	kids   []*objNode // the node of member i's value, nil when not indexed
	size   int32      // length of the object's encoding
}

func (n *objNode) memberEnd(i int) int32 {
	if i+1 < len(n.keys) {
		return n.starts[i+1] - 1 // the comma before the next member
	}
	return n.size - 1 // the closing brace
}

// trie is a set of declared paths.
type trie struct {
	whole bool
	kids  map[string]*trie
}

func newTrie(paths []Path) *trie {
	t := &trie{}
	for _, p := range paths {
		n := t
		for _, k := range p {
			if n.whole {
				break
			}
			if n.kids == nil {
				n.kids = map[string]*trie{}
			}
			c := n.kids[k]
			if c == nil {
				c = &trie{}
				n.kids[k] = c
			}
			n = c
		}
		n.whole, n.kids = true, nil
	}
	return t
}

// copyPaths returns state with every object on the paths of t copied and
// the copies added to own, and every value at the end of a path
// deep-copied, sharing everything else; an object own holds already is not
// copied again (only this tree holds it, and the reducer may change it in
// place). inPlace reports that one was not copied.
// An open savepoint (sp, nil when none) records every member of an object
// changed in place: those of t's kids, which the reducer may also add.
func copyPaths(state any, t *trie, own *ownership, sp *Savepoint) (next any, inPlace bool) {
	m, ok := state.(map[string]any)
	if t.whole || !ok {
		return CloneJSON(state), false
	}
	c := m
	if own.owns(m) {
		inPlace = true
	} else {
		c = maps.Clone(m)
		own.add(c)
	}
	for k, sub := range t.kids {
		if inPlace && sp != nil {
			sp.record(c, k)
		}
		if v, ok := c[k]; ok {
			var kidInPlace bool
			c[k], kidInPlace = copyPaths(v, sub, own, sp)
			inPlace = inPlace || kidInPlace
		}
	}
	return c, inPlace
}

// encoder builds canonical encodings and their indexes.
type encoder struct{ dst []byte }

// value appends v's canonical encoding, and returns the node of v when it
// is an object of at least nodeMinBytes.
func (e *encoder) value(v any) (*objNode, error) {
	m, ok := v.(map[string]any)
	if !ok {
		var err error
		e.dst, err = appendValue(e.dst, v)
		return nil, err
	}
	n, err := e.object(m)
	if err != nil || n.size < nodeMinBytes {
		return nil, err
	}
	return n, nil
}

func (e *encoder) object(m map[string]any) (*objNode, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, CompareUTF16)
	n := &objNode{keys: keys, starts: make([]int32, len(keys))}
	base := len(e.dst)
	e.dst = append(e.dst, '{')
	for i, k := range keys {
		if i > 0 {
			e.dst = append(e.dst, ',')
		}
		n.starts[i] = int32(len(e.dst) - base)
		kid, err := e.member(k, m[k])
		if err != nil {
			return nil, under(err, k)
		}
		if kid != nil {
			if n.kids == nil {
				n.kids = make([]*objNode, len(keys))
			}
			n.kids[i] = kid
		}
	}
	e.dst = append(e.dst, '}')
	n.size = int32(len(e.dst) - base)
	return n, nil
}

func (e *encoder) member(k string, v any) (*objNode, error) {
	e.dst = appendString(e.dst, k)
	e.dst = append(e.dst, ':')
	return e.value(v)
}

// update appends the encoding of m, the object old (encoded as oldEnc)
// became once the members on the paths of t changed: the members t names
// are encoded again (descending into indexed objects), the others copied.
func (e *encoder) update(old *objNode, oldEnc []byte, m map[string]any, t *trie) (*objNode, error) {
	touched := make([]string, 0, len(t.kids))
	for k := range t.kids {
		touched = append(touched, k)
	}
	slices.SortFunc(touched, CompareUTF16)
	// When every touched member was there before and still is (the common
	// case, a member's value changed), the keys are old's: the new node
	// shares old's key array, which is never changed once made, rather
	// than copying it.
	sameKeys := true
	for _, k := range touched {
		_, was := slices.BinarySearchFunc(old.keys, k, CompareUTF16)
		_, is := m[k]
		sameKeys = sameKeys && was == is
	}
	capacity := len(old.keys) + len(touched)
	n := &objNode{starts: make([]int32, 0, capacity)}
	if !sameKeys {
		n.keys = make([]string, 0, capacity)
	}
	count := 0 // members written so far
	addKey := func(keys ...string) {
		if !sameKeys {
			n.keys = append(n.keys, keys...)
		}
		count += len(keys)
	}
	base := len(e.dst)
	e.dst = append(e.dst, '{')
	addKid := func(kid *objNode) {
		if kid == nil && n.kids == nil {
			return
		}
		if n.kids == nil {
			n.kids = make([]*objNode, count-1, capacity)
		}
		n.kids = append(n.kids, kid)
	}
	sep := func() {
		if count > 0 {
			e.dst = append(e.dst, ',')
		}
	}
	// copyRun copies old members [from, to) verbatim.
	copyRun := func(from, to int) {
		if from >= to {
			return
		}
		sep()
		shift := int32(len(e.dst)-base) - old.starts[from]
		e.dst = append(e.dst, oldEnc[old.starts[from]:old.memberEnd(to-1)]...)
		at := len(n.starts)
		n.starts = append(n.starts, old.starts[from:to]...)
		for i := at; i < len(n.starts); i++ {
			n.starts[i] += shift
		}
		if old.kids != nil || n.kids != nil {
			if n.kids == nil {
				n.kids = make([]*objNode, count, capacity)
			}
			if old.kids != nil {
				n.kids = append(n.kids, old.kids[from:to]...)
			} else {
				n.kids = append(n.kids, make([]*objNode, to-from)...)
			}
		}
		addKey(old.keys[from:to]...)
	}
	i := 0
	for _, k := range touched {
		j, found := slices.BinarySearchFunc(old.keys[i:], k, CompareUTF16)
		j += i
		copyRun(i, j)
		i = j
		if found {
			i++
		}
		v, ok := m[k]
		if !ok {
			continue
		}
		sep()
		start := len(e.dst)
		addKey(k)
		n.starts = append(n.starts, int32(start-base))
		sub := t.kids[k]
		vm, isMap := v.(map[string]any)
		var oldKid *objNode
		if found && old.kids != nil {
			oldKid = old.kids[j]
		}
		var (
			kid *objNode
			err error
		)
		if oldKid != nil && isMap && !sub.whole {
			e.dst = appendString(e.dst, k)
			e.dst = append(e.dst, ':')
			kidStart := old.starts[j] + int32(len(e.dst)-start)
			kid, err = e.update(oldKid, oldEnc[kidStart:kidStart+oldKid.size], vm, sub)
			if err == nil && kid.size < nodeMinBytes {
				kid = nil
			}
		} else {
			kid, err = e.member(k, v)
		}
		if err != nil {
			return nil, under(err, k)
		}
		addKid(kid)
	}
	copyRun(i, len(old.keys))
	if sameKeys {
		n.keys = old.keys
	}
	e.dst = append(e.dst, '}')
	n.size = int32(len(e.dst) - base)
	return n, nil
}

// keptPrefix is how many leading bytes of old's encoding an update of the
// members the paths of t name leaves where they were: everything before the
// first of those members, which update copies verbatim to the same offsets,
// less the comma before it, which a removal of the last member drops.
func keptPrefix(old *objNode, t *trie) int {
	first := len(old.keys)
	for k := range t.kids {
		j, _ := slices.BinarySearchFunc(old.keys, k, CompareUTF16)
		first = min(first, j)
	}
	if first < len(old.keys) {
		return int(old.starts[first]) - 1
	}
	return int(old.size - 1) // the closing brace, where a new last member goes
}

// encodeState returns the canonical encoding of state. When prev encodes
// the state the declared paths t were changed from (next shares every
// object off them), only those paths are encoded again; otherwise the whole
// state is. sizeHint is the expected length (the kept bytes are held as long
// as the state, so their buffer should not be twice their size).
func encodeState(prev *canon, next any, t *trie, sizeHint int) (*canon, error) {
	c := &canon{}
	c.refs.Store(1)
	m, isMap := next.(map[string]any)
	size := sizeHint + sizeHint/16 + 64
	e := &encoder{dst: getBuffer(size)}
	var err error
	kept := 0 // leading bytes known to equal prev's
	switch {
	case !isMap:
		e.dst, err = appendValue(e.dst, next)
	case prev != nil && prev.node != nil && t != nil && !t.whole:
		c.root = m
		kept = keptPrefix(prev.node, t)
		c.node, err = e.update(prev.node, prev.enc, m, t)
	default:
		c.root = m
		c.node, err = e.object(m)
	}
	if err != nil {
		return nil, err
	}
	c.enc = e.dst
	if err := c.digest(prev, kept); err != nil {
		return nil, err
	}
	return c, nil
}

// digest hashes c.enc, resuming from prev's last checkpoint before the first
// byte in which the two encodings differ; their first kept bytes are known
// to be equal and are not compared.
func (c *canon) digest(prev *canon, kept int) error {
	h := sha256.New()
	from := 0
	if prev != nil {
		same := commonPrefix(prev.enc, c.enc, kept) / checkpointBytes
		same = min(same, len(prev.checkpoints))
		if same > 0 {
			if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(prev.checkpoints[same-1]); err != nil {
				return fmt.Errorf("resume the state digest: %w", err)
			}
			c.checkpoints = append(make([][]byte, 0, len(c.enc)/checkpointBytes), prev.checkpoints[:same]...)
			from = same * checkpointBytes
		}
	}
	for from+checkpointBytes <= len(c.enc) {
		h.Write(c.enc[from : from+checkpointBytes])
		from += checkpointBytes
		st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			return fmt.Errorf("save the state digest: %w", err)
		}
		c.checkpoints = append(c.checkpoints, st)
	}
	h.Write(c.enc[from:])
	c.hash = base64.StdEncoding.EncodeToString(h.Sum(nil))
	return nil
}

// commonPrefix is the length of the longest common prefix of a and b,
// whose first from bytes are known to be equal.
func commonPrefix(a, b []byte, from int) int {
	n := min(len(a), len(b))
	const block = 4096
	i := min(from, n)
	for i+block <= n && bytes.Equal(a[i:i+block], b[i:i+block]) {
		i += block
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}
