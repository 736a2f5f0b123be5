package model_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
)

// setInput is the input of the property model's actions: set (or remove)
// the value at a path, creating the objects on the way.
type setInput struct {
	Path   []string        `json:"path"`
	Value  json.RawMessage `json:"value"`
	Remove bool            `json:"remove"`
}

func setAt(state any, call *model.Call) (any, error) {
	in := call.Input.(*setInput)
	var v any
	if !in.Remove {
		var err error
		if v, err = model.DecodeJSON(in.Value); err != nil {
			return nil, err
		}
	}
	if len(in.Path) == 0 {
		return v, nil
	}
	m, ok := state.(map[string]any)
	if !ok {
		m = map[string]any{}
		state = m
	}
	for _, k := range in.Path[:len(in.Path)-1] {
		c, ok := m[k].(map[string]any)
		if !ok {
			c = map[string]any{}
			m[k] = c
		}
		m = c
	}
	last := in.Path[len(in.Path)-1]
	if in.Remove {
		delete(m, last)
	} else {
		m[last] = v
	}
	return state, nil
}

func touchesPath(input any) []model.Path { return []model.Path{input.(*setInput).Path} }

// propertyModel has the same change declared (SET) and undeclared
// (SET_WHOLE), so that a stream goes back and forth between incremental
// and full hashing, and jsondoc's two actions.
func propertyRegistry(t testing.TB) *model.Registry {
	global := []string{oplog.ScopeGlobal}
	decode := model.DecodeInput[setInput](nil)
	merge, _ := jsondoc.Model().Action(jsondoc.ActionMergePatch)
	patch, _ := jsondoc.Model().Action(jsondoc.ActionJSONPatch)
	spec := model.MustSpec(model.Spec{
		DocumentType: "test/property", ModelVersion: 1,
		Initial: map[string]func() any{oplog.ScopeGlobal: func() any { return map[string]any{} }},
		ActionList: []*model.ActionSpec{
			{Type: "SET", Scopes: global, Decode: decode, Reduce: setAt, Touches: touchesPath},
			{Type: "SET_WHOLE", Scopes: global, Decode: decode, Reduce: setAt},
			{Type: "MERGE", Scopes: global, Decode: merge.Decode, Reduce: merge.Reduce, Touches: merge.Touches},
			{Type: "PATCH", Scopes: global, Decode: patch.Decode, Reduce: patch.Reduce, Touches: patch.Touches},
			// Two that fail after they changed their path: a refusal that
			// broke the contract (a reducer refuses before it writes), and
			// a panic.
			{Type: "SET_REFUSE", Scopes: global, Decode: decode, Touches: touchesPath,
				Reduce: func(state any, call *model.Call) (any, error) {
					if _, err := setAt(state, call); err != nil {
						return nil, err
					}
					return nil, &model.BusinessRuleViolation{Rule: "refused", Message: "after writing"}
				}},
			{Type: "SET_PANIC", Scopes: global, Decode: decode, Touches: touchesPath,
				Reduce: func(state any, call *model.Call) (any, error) {
					if _, err := setAt(state, call); err != nil {
						return nil, err
					}
					panic("after writing")
				}},
		},
	})
	reg, err := model.NewRegistry(spec)
	require.NoError(t, err)
	return reg
}

// gen draws random JSON: keys that exercise RFC 8785's UTF-16 order and
// escaping, numbers of every notation, and objects large enough to be
// indexed.
type gen struct{ r *rand.Rand }

var keyAlphabet = []string{"a", "b", "item", "Z", "é", "\ue000", "😀", "\ufb01", "\u0007", "\"", "\\", "0", "-"}

func (g gen) key() string {
	n := 1 + g.r.IntN(3)
	s := ""
	for range n {
		s += keyAlphabet[g.r.IntN(len(keyAlphabet))]
	}
	if g.r.IntN(2) == 0 {
		s += fmt.Sprint(g.r.IntN(40))
	}
	return s
}

func (g gen) scalar() any {
	switch g.r.IntN(7) {
	case 0:
		return nil
	case 1:
		return g.r.IntN(2) == 0
	case 2:
		return float64(g.r.IntN(1000) - 500)
	case 3:
		return []float64{1e21, 1e-7, 0.1, -2.5e-9, 123456789012345680000, 5e-324}[g.r.IntN(6)]
	case 4:
		return g.key() + " a string of some length"
	default:
		return fmt.Sprintf("record %d", g.r.IntN(1<<20))
	}
}

func (g gen) value(depth int) any {
	if depth <= 0 {
		return g.scalar()
	}
	switch g.r.IntN(6) {
	case 0:
		a := make([]any, g.r.IntN(4))
		for i := range a {
			a[i] = g.value(depth - 1)
		}
		return a
	case 1, 2:
		return g.object(depth-1, g.r.IntN(6))
	case 3:
		if depth == 1 {
			// Large enough (over a kilobyte) to be indexed member by member.
			return g.object(0, 30+g.r.IntN(50))
		}
	}
	return g.scalar()
}

func (g gen) object(depth, n int) map[string]any {
	m := make(map[string]any, n)
	for range n {
		m[g.key()] = g.value(depth)
	}
	return m
}

// path picks a path into state: mostly an existing one, sometimes one that
// goes on into new members.
func (g gen) path(state any) []string {
	var p []string
	for {
		m, ok := state.(map[string]any)
		if !ok || len(m) == 0 || g.r.IntN(4) == 0 {
			break
		}
		i, pick := g.r.IntN(len(m)), ""
		for k := range m {
			if i == 0 {
				pick = k
				break
			}
			i--
		}
		p = append(p, pick)
		state = m[pick]
	}
	if len(p) == 0 || g.r.IntN(5) == 0 {
		p = append(p, g.key())
	}
	return p
}

func pointer(p []string) string {
	s := ""
	for _, k := range p {
		s += "/" + jsonPointerEscape(k)
	}
	return s
}

func jsonPointerEscape(k string) string {
	out := ""
	for _, c := range k {
		switch c {
		case '~':
			out += "~0"
		case '/':
			out += "~1"
		default:
			out += string(c)
		}
	}
	return out
}

// change draws one small random action against state.
func (g gen) change(state any) (string, any) {
	path := g.path(state)
	small := g.value(1 + g.r.IntN(2))
	switch g.r.IntN(10) {
	case 0:
		return "SET_WHOLE", setInput{Path: path, Value: mustJSON(small)}
	case 1:
		return "SET", setInput{Path: path, Remove: true}
	case 2, 3:
		// A merge patch along the path.
		var patch any = small
		if g.r.IntN(4) == 0 {
			patch = nil // removes the member
		}
		for i := len(path) - 1; i >= 0; i-- {
			patch = map[string]any{path[i]: patch}
		}
		return "MERGE", patch
	case 4:
		return "PATCH", []any{map[string]any{"op": "add", "path": pointer(path), "value": small}}
	}
	return "SET", setInput{Path: path, Value: mustJSON(small)}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// checkFull asserts that st's hash, size and kept encoding are those a full
// recomputation from its state gives.
func checkFull(t testing.TB, st *model.StreamState, what string) {
	t.Helper()
	full := checkHash(t, st, what)
	kept, err := st.Canonical()
	require.NoError(t, err)
	require.Equal(t, string(full), string(kept), what)
}

// checkHash asserts that st's hash and size are those a full recomputation
// from its state gives, and returns its encoding. Unlike checkFull it
// leaves the kept encoding unexported (Canonical hands its bytes out, and
// their buffer is then never reused), so that a buffer reused while still
// held shows in a later hash.
func checkHash(t testing.TB, st *model.StreamState, what string) []byte {
	t.Helper()
	full, err := model.Canonical(st.State)
	require.NoError(t, err)
	require.Equal(t, model.HashBytes(full), st.Hash, "%s: the incremental hash differs from a full recomputation", what)
	require.Equal(t, len(full), st.Size, what)
	return full
}

// newPropertyDoc creates a document of the property model and returns its
// document scope and its empty global scope.
func newPropertyDoc(t testing.TB, reg *model.Registry) (doc, global *model.StreamState) {
	t.Helper()
	docKey := oplog.StreamKey{DocumentID: "doc", Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}
	doc = model.NewStreamState(docKey, "test/property")
	create := oplog.Action{ID: "create", Type: model.ActionCreateDocument, Scope: oplog.ScopeDocument, Input: json.RawMessage(`{}`)}
	_, err := reg.Apply(nil, doc, &create)
	require.NoError(t, err)
	key := oplog.StreamKey{DocumentID: "doc", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	return doc, model.NewStreamState(key, "test/property")
}

// runProperty applies steps random changes to one document grown from seed,
// and checks after each that the incremental hash is a full recomputation's;
// that every clone taken on the way (a state shared with the states after
// it) still has the state and hash it had; that a replay from index 0 and
// one from a keyframe (a state reloaded after an eviction) reproduce every
// stored hash; and that applying to a reloaded state goes on hashing right.
func runProperty(t testing.TB, reg *model.Registry, seed uint64, steps int) {
	g := gen{rand.New(rand.NewPCG(seed, 0x5eed))}
	doc, st := newPropertyDoc(t, reg)
	key := st.Stream

	var ops []oplog.Operation
	type snapshot struct {
		st    *model.StreamState
		state any
		hash  string
	}
	var snaps []snapshot
	apply := func(typ string, input any) {
		a := oplog.Action{ID: fmt.Sprint("a", len(ops)), Type: typ, Scope: oplog.ScopeGlobal, Input: mustJSON(input)}
		// The executor applies each job to a copy, so a failed job leaves
		// the head as it was. Half the time the action goes to the state
		// itself instead, as a job's later actions and a projector's
		// replay do: the objects an earlier action copied are then changed
		// in place, and a refusal may leave the state poisoned, to be
		// reloaded.
		next := st
		var before oplog.Keyframe
		if g.r.IntN(2) == 0 {
			next = st.Clone()
		} else if st.Revision > 0 {
			var err error
			before, err = st.Keyframe()
			require.NoError(t, err)
		}
		res, err := reg.Apply(doc, next, &a)
		if err != nil {
			if next != st {
				require.False(t, next.Poisoned(), "%s %s: %v", typ, a.Input, err)
				return
			}
			if st.Poisoned() {
				st, err = model.FromKeyframe(before)
				require.NoError(t, err)
			}
			checkFull(t, st, fmt.Sprintf("seed %d after the refused %s %s", seed, typ, a.Input))
			return
		}
		ops = append(ops, oplog.Operation{OpID: a.ID, DocumentID: "doc", DocumentType: "test/property", Scope: key.Scope,
			Branch: key.Branch, Index: res.Index, Hash: res.Hash, Version: res.Version, Action: a})
		if next != st {
			// As the executor does once a job's successor succeeded: the
			// state it was applied over is no one's.
			st.Discard()
		}
		st = next
		what := fmt.Sprintf("seed %d step %d, %s %s", seed, len(ops), typ, a.Input)
		if g.r.IntN(8) == 0 {
			checkFull(t, st, what)
		} else {
			checkHash(t, st, what)
		}
		if g.r.IntN(4) == 0 {
			snaps = append(snaps, snapshot{st.Clone(), model.CloneJSON(st.State), st.Hash})
		}
	}
	// A state of a few kilobytes to start with, with large objects inside.
	apply("SET_WHOLE", setInput{Value: mustJSON(g.object(2, 30+g.r.IntN(40)))})
	for range steps {
		typ, in := g.change(st.State)
		apply(typ, in)
		if g.r.IntN(20) == 0 {
			// Evicted and reloaded from a keyframe at the head.
			kf, err := st.Keyframe()
			require.NoError(t, err)
			st, err = model.FromKeyframe(kf)
			require.NoError(t, err)
		}
	}
	for i, s := range snaps {
		require.True(t, model.EqualJSON(s.state, s.st.State), "seed %d: snapshot %d was changed by a later action", seed, i)
		require.Equal(t, s.hash, s.st.Hash)
		checkFull(t, s.st, fmt.Sprintf("seed %d snapshot %d", seed, i))
	}
	replayed, err := reg.ReplayStream(key, "test/property", ops)
	require.NoError(t, err, "seed %d: replay from index 0", seed)
	require.Equal(t, st.Hash, replayed.Hash)
	checkFull(t, replayed, "replayed")
	if n := len(ops); n > 2 {
		at := 1 + g.r.IntN(n-1)
		from, err := reg.ReplayStream(key, "test/property", ops[:at])
		require.NoError(t, err)
		kf, err := from.Keyframe()
		require.NoError(t, err)
		re, err := model.FromKeyframe(kf)
		require.NoError(t, err)
		require.NoError(t, reg.Replay(re, ops[at:]), "seed %d: replay from the keyframe at %d", seed, at-1)
		require.Equal(t, st.Hash, re.Hash)
	}
}

// TestIncrementalHashEqualsFull runs 200 random documents of 20 changes
// each (4,000 changes, a fixed seed per document).
func TestIncrementalHashEqualsFull(t *testing.T) {
	t.Parallel()
	reg := propertyRegistry(t)
	for seed := range uint64(200) {
		runProperty(t, reg, seed, 20)
	}
}

// TestIncrementalLargeState makes 120 small changes to one 200 KB state,
// whose top-level object and nested record sets are indexed and whose
// digest resumes from checkpoints: changed values, removals, members added
// first and last, the last removed, and a change beside a removal of a missing member.
func TestIncrementalLargeState(t *testing.T) {
	t.Parallel()
	d := benchDoc(t, 200<<10)
	st := d.Stream(oplog.ScopeGlobal)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 120 {
		k := fmt.Sprintf("item-%05d", r.IntN(2400))
		var patch any = map[string]any{k: map[string]any{"n": i, "nested": map[string]any{"x": i}}}
		switch i % 10 {
		case 3:
			patch = map[string]any{k: nil}
		case 7:
			patch = map[string]any{"zz-new-" + k: "appended"}
		case 5:
			patch = map[string]any{"a-new-" + k: "inserted first"}
		case 6:
			// "~" sorts after every other key: this member is the last.
			patch = map[string]any{"~last": i}
		case 8:
			// Removing the last member drops the comma before it too.
			patch = map[string]any{"~last": nil}
		case 9:
			// A change beside a removal of a member that is not there:
			// the set of keys stays as it was.
			patch = map[string]any{k: map[string]any{"n": -i}, "missing-" + k: nil}
		}
		d.Must(oplog.ScopeGlobal, jsondoc.ActionMergePatch, patch)
		checkFull(t, st, fmt.Sprintf("change %d", i))
	}
	d.VerifyReplay()
}

func FuzzIncrementalHash(f *testing.F) {
	reg := propertyRegistry(f)
	for _, s := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(s, uint8(10))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		runProperty(t, reg, seed, int(steps%40))
	})
}
