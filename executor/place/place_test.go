package place_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor/place"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/jsondoc"
)

var global = oplog.StreamKey{DocumentID: "d", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}

// replica is one replica's global stream of a doclog/json document whose
// state is {"log": [...]}, each operation appending its name: the state
// tells the order the operations were applied in.
type replica struct {
	t      *testing.T
	rng    *rand.Rand // for windowed
	reg    *model.Registry
	doc    *model.StreamState
	head   *model.StreamState
	stored []oplog.Operation
}

func newReplica(t *testing.T) *replica {
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	docKey := global
	docKey.Scope = oplog.ScopeDocument
	doc := model.NewStreamState(docKey, jsondoc.DocumentType)
	input, _ := json.Marshal(model.CreateDocumentInput{DocumentType: jsondoc.DocumentType})
	_, err = reg.Apply(doc, doc, &oplog.Action{ID: "create", Type: model.ActionCreateDocument, Scope: oplog.ScopeDocument, Input: input})
	require.NoError(t, err)
	r := &replica{t: t, reg: reg, doc: doc, head: model.NewStreamState(global, jsondoc.DocumentType)}
	base := place.Incoming{OpID: "base", Index: -1, Action: oplog.Action{ID: "base", Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal, Input: json.RawMessage(`{"log":[]}`)}}
	r.mustCommit(place.Ordinary(global, place.Whole(r.stored), []place.Incoming{base}, place.DefaultMaxSkipThreshold))
	return r
}

// entry is a new operation appending name, stamped ts.
func entry(name string, ts int64) place.Incoming {
	return place.Incoming{OpID: "op-" + name, Index: -1, Action: oplog.Action{
		ID: name, Type: jsondoc.ActionJSONPatch, Scope: oplog.ScopeGlobal, TimestampUtcMs: ts,
		Input: json.RawMessage(`[{"op":"add","path":"/log/-","value":"` + name + `"}]`),
	}}
}

// commit derives a plan and appends its operations, as the executor would.
func (r *replica) commit(p *place.Plan, err error) ([]oplog.Operation, error) {
	if err != nil {
		return nil, err
	}
	ops, head, err := place.Derive(r.reg, r.doc, r.head, place.Whole(r.stored), p)
	if err != nil {
		return nil, err
	}
	r.stored = append(r.stored, ops...)
	r.head = head
	return ops, nil
}

func (r *replica) mustCommit(p *place.Plan, err error) []oplog.Operation {
	r.t.Helper()
	ops, err := r.commit(p, err)
	require.NoError(r.t, err)
	return ops
}

// load plans incoming as a load job's operations and commits them.
func (r *replica) load(incoming []place.Incoming, maxSkip int64) (*place.Plan, error) {
	p, err := place.Load(global, place.Whole(r.stored), incoming, maxSkip)
	if err != nil {
		return nil, err
	}
	_, err = r.commit(p, nil)
	return p, err
}

// asLoad is what a load job carries of stored operations.
func asLoad(ops []oplog.Operation) []place.Incoming {
	out := make([]place.Incoming, len(ops))
	for i, op := range ops {
		out[i] = place.Incoming{OpID: op.OpID, Index: op.Index, Skip: op.Skip, Hash: op.Hash, Action: op.Action}
	}
	return out
}

// log is the replica's state: the names in the order applied.
func (r *replica) log() []string {
	var out []string
	for _, v := range r.head.State.(map[string]any)["log"].([]any) {
		out = append(out, v.(string))
	}
	return out
}

// verify replays the stored stream from index 0, as a projector or
// doclogctl verify would, and checks it reproduces every hash and the head.
func (r *replica) verify() {
	r.t.Helper()
	st, err := r.reg.ReplayStream(global, jsondoc.DocumentType, r.stored)
	require.NoError(r.t, err)
	require.Equal(r.t, r.head.Hash, st.Hash)
	require.True(r.t, model.EqualJSON(r.head.State, st.State))
}

func TestLoadReplaysAndAppendsAtTheHead(t *testing.T) {
	t.Parallel()
	origin := newReplica(t)
	origin.mustCommit(place.Ordinary(global, place.Whole(origin.stored), []place.Incoming{entry("a1", 10), entry("a2", 20)}, 10))

	r := newReplica(t)
	p, err := r.load(asLoad(origin.stored), 10)
	require.NoError(t, err)
	require.Equal(t, []string{"base"}, p.Replays, "the common first operation is stored at its index")
	require.Zero(t, p.Skip)
	require.Len(t, p.Tail, 2)
	require.NotEmpty(t, p.Tail[0].Check, "a load continuing the head has its hashes checked")
	require.Equal(t, origin.head.Hash, r.head.Hash)
	require.Equal(t, origin.stored, r.stored)

	p, err = r.load(asLoad(origin.stored), 10)
	require.NoError(t, err)
	require.Equal(t, []string{"base", "op-a1", "op-a2"}, p.Replays)
	require.Empty(t, p.Tail)
}

func TestLoadHashMismatch(t *testing.T) {
	t.Parallel()
	origin := newReplica(t)
	origin.mustCommit(place.Ordinary(global, place.Whole(origin.stored), []place.Incoming{entry("a1", 10)}, 10))
	r := newReplica(t)
	in := asLoad(origin.stored[1:])
	in[0].Hash = "AAAA"
	_, err := r.load(in, 10)
	var hm *place.HashMismatchError
	require.ErrorAs(t, err, &hm)
	require.Equal(t, place.NameHashMismatch, oplog.ErrorName(err))
	require.Equal(t, int64(1), hm.Index)
	require.Len(t, r.stored, 1, "nothing was appended")
}

// TestLoadReshuffle is the worked example of docs/sync.md: b1 (stamped 20)
// was made on a replica that had only base; here a1 (10) and a2 (30) follow
// base. b1 belongs between them, so a2 is superseded and re-appended after
// it.
func TestLoadReshuffle(t *testing.T) {
	t.Parallel()
	r := newReplica(t)
	r.mustCommit(place.Ordinary(global, place.Whole(r.stored), []place.Incoming{entry("a1", 10), entry("a2", 30)}, 10))
	other := newReplica(t)
	other.mustCommit(place.Ordinary(global, place.Whole(other.stored), []place.Incoming{entry("b1", 20)}, 10))

	p, err := r.load(asLoad(other.stored), 10)
	require.NoError(t, err)
	require.Equal(t, []string{"base"}, p.Replays)
	require.Equal(t, int64(3), p.Revision)
	require.Equal(t, int64(2), p.Base)
	require.Equal(t, int64(1), p.Skip)
	require.Equal(t, 1, p.Moved)
	var got []string
	for _, op := range r.stored {
		got = append(got, fmt.Sprintf("%d:%s/skip%d", op.Index, op.OpID, op.Skip))
	}
	require.Equal(t, []string{"0:base/skip0", "1:op-a1/skip0", "2:op-a2/skip0", "3:op-b1/skip1", "4:op-a2/skip0"}, got)
	require.Equal(t, []string{"a1", "b1", "a2"}, r.log())
	r.verify()

	// The other replica receives r's operations and converges.
	_, err = other.load(asLoad(r.stored), 10)
	require.NoError(t, err)
	require.Equal(t, []string{"a1", "b1", "a2"}, other.log())
	require.Equal(t, r.head.Hash, other.head.Hash)
	other.verify()
}

func TestLoadExcessiveShuffle(t *testing.T) {
	t.Parallel()
	r := newReplica(t)
	r.mustCommit(place.Ordinary(global, place.Whole(r.stored), []place.Incoming{entry("a1", 10), entry("a2", 30), entry("a3", 40)}, 10))
	other := newReplica(t)
	other.mustCommit(place.Ordinary(global, place.Whole(other.stored), []place.Incoming{entry("b1", 5)}, 10))
	_, err := r.load(asLoad(other.stored), 2)
	var es *place.ExcessiveShuffleError
	require.ErrorAs(t, err, &es)
	require.Equal(t, place.NameExcessiveShuffle, oplog.ErrorName(err))
	require.Equal(t, int64(3), es.Skip)
	require.Equal(t, int64(1), es.Base)
	_, err = r.load(asLoad(other.stored), 3)
	require.NoError(t, err, "a threshold equal to the skip allows it")
	require.Equal(t, []string{"b1", "a1", "a2", "a3"}, r.log())
}

func TestLoadMissingOperations(t *testing.T) {
	t.Parallel()
	origin := newReplica(t)
	origin.mustCommit(place.Ordinary(global, place.Whole(origin.stored), []place.Incoming{entry("a1", 10), entry("a2", 20), entry("a3", 30)}, 10))
	all := asLoad(origin.stored)
	for _, tc := range []struct {
		name string
		in   []place.Incoming
		want string
	}{
		{"gap", []place.Incoming{all[0], all[1], all[3]}, "the load's indexes jump from 1 to 3"},
		{"past the head", all[2:], "the load starts at index 2 and the stream holds 1 operations"},
		{"skip before the load", func() []place.Incoming {
			in := slices.Clone(all[1:])
			in[0].Skip = 1
			return in
		}(), "reaching index 0 before the load's first (1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplica(t)
			_, err := r.load(tc.in, 10)
			var mo *place.MissingOperationsError
			require.ErrorAs(t, err, &mo)
			require.Equal(t, place.NameMissingOperations, oplog.ErrorName(err))
			require.Contains(t, err.Error(), tc.want)
			require.Len(t, r.stored, 1)
		})
	}
}

func TestOrdinaryPlacement(t *testing.T) {
	t.Parallel()
	r := newReplica(t)
	r.mustCommit(place.Ordinary(global, place.Whole(r.stored), []place.Incoming{entry("a1", 10), entry("a3", 30)}, 10))
	p, err := place.Ordinary(global, place.Whole(r.stored), []place.Incoming{entry("late", 20)}, 10)
	require.NoError(t, err)
	require.Equal(t, int64(1), p.Skip, "a3 is superseded")
	r.mustCommit(p, nil)
	require.Equal(t, []string{"a1", "late", "a3"}, r.log())
	r.verify()

	_, err = place.Ordinary(global, place.Whole(r.stored), []place.Incoming{entry("x", 50), entry("y", 50)}, 10)
	var nm *place.NonMonotonicTimestampsError
	require.ErrorAs(t, err, &nm)
	require.Equal(t, place.NameNonMonotonicTimestamps, oplog.ErrorName(err))
	require.Equal(t, 1, nm.Position)
	_, err = place.Ordinary(global, place.Whole(r.stored), []place.Incoming{entry("x", 50), entry("y", 40)}, 10)
	require.ErrorAs(t, err, &nm)
}

// TestConvergence is the property: operations made on several origins from
// a common base, delivered to two replicas through load jobs in different
// orders (each origin's operations in its own order, cut into segments that
// may repeat what was sent before), leave both replicas with the same state
// and hash, the operations in timestamp order, and streams whose replay
// reproduces every stored hash.
func TestConvergence(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	reshuffles, extended := 0, 0
	for c := range 300 {
		origins := 2 + rng.IntN(3)
		type segment struct {
			origin int
			ops    []place.Incoming
		}
		var chains [][]place.Incoming
		var names []string
		for o := range origins {
			src := newReplica(t)
			var ops []place.Incoming
			ts := int64(rng.IntN(5))
			for k := range 1 + rng.IntN(5) {
				name := fmt.Sprintf("c%d-o%d-%d", c, o, k)
				names = append(names, name)
				ops = append(ops, entry(name, ts))
				ts += 1 + int64(rng.IntN(4)) // ties across origins are common
			}
			src.mustCommit(place.Ordinary(global, place.Whole(src.stored), ops, 100))
			chains = append(chains, asLoad(src.stored))
		}
		deliveries := func() []segment {
			next := make([]int, origins) // per origin, the next index to send
			for o := range next {
				next[o] = 1
			}
			var out []segment
			for {
				var open []int
				for o := range origins {
					if next[o] < len(chains[o]) {
						open = append(open, o)
					}
				}
				if len(open) == 0 {
					return out
				}
				o := open[rng.IntN(len(open))]
				from := next[o] - rng.IntN(next[o]+1) // sometimes resend
				to := next[o] + 1 + rng.IntN(len(chains[o])-next[o])
				out = append(out, segment{o, chains[o][from:to]})
				next[o] = to
			}
		}
		var logs [][]string
		var hashes []string
		for range 2 {
			r := newReplica(t)
			for _, s := range deliveries() {
				p, err := r.load(s.ops, 1000)
				require.NoError(t, err, "case %d", c)
				if p.Reshuffles() {
					reshuffles++
					if p.Moved > 0 && r.stored[p.Base].OpID != p.Tail[0].OpID && p.Base < p.Revision-int64(p.Moved) {
						extended++
					}
				}
			}
			r.verify()
			logs = append(logs, r.log())
			hashes = append(hashes, r.head.Hash)
			ids := map[string]bool{}
			var last place.Key
			for n, i := range place.Effective(r.stored) {
				op := &r.stored[i]
				k := place.Key{TimestampUtcMs: op.TimestampUtcMs, OpID: op.OpID}
				require.True(t, n == 0 || last.Compare(k) < 0, "case %d: the effective stream is in key order", c)
				last = k
				require.False(t, ids[op.OpID], "case %d: %s twice in the effective stream", c, op.OpID)
				ids[op.OpID] = true
			}
		}
		require.Equal(t, logs[0], logs[1], "case %d", c)
		require.Equal(t, hashes[0], hashes[1], "case %d", c)
		want := slices.Clone(names)
		require.ElementsMatch(t, want, logs[0], "case %d: every operation once", c)
	}
	require.Greater(t, reshuffles, 300, "the cases reshuffle")
	require.Greater(t, extended, 10, "some reshuffles reach back over an earlier one")
	t.Logf("%d reshuffles, %d reaching over an earlier one", reshuffles, extended)
}

func TestKeyOrder(t *testing.T) {
	t.Parallel()
	require.Equal(t, -1, place.Key{TimestampUtcMs: 1, OpID: "z"}.Compare(place.Key{TimestampUtcMs: 2, OpID: "a"}))
	require.Equal(t, -1, place.Key{TimestampUtcMs: 2, OpID: "a"}.Compare(place.Key{TimestampUtcMs: 2, OpID: "b"}))
	require.Equal(t, 0, place.Key{TimestampUtcMs: 2, OpID: "a"}.Compare(place.Key{TimestampUtcMs: 2, OpID: "a"}))
}

// A merge that supersedes the stream from index 0 re-derives from the empty
// state, and a replay of the stream (which then starts from nothing in
// effect, at a revision above 0) reproduces every hash.
func TestLoadSupersedingTheWholeStream(t *testing.T) {
	t.Parallel()
	r := newReplica(t)
	first := place.Incoming{OpID: "op-first", Index: 0, Hash: "unchecked", Action: oplog.Action{ID: "first", Type: jsondoc.ActionMergePatch,
		Scope: oplog.ScopeGlobal, TimestampUtcMs: -1, Input: json.RawMessage(`{"first":true}`)}}
	p, err := r.load([]place.Incoming{first}, 10)
	require.NoError(t, err)
	require.Equal(t, int64(0), p.Base)
	require.Equal(t, int64(1), p.Skip)
	require.Equal(t, map[string]any{"first": true, "log": []any{}}, r.head.State)
	r.verify()
}

// windowed is what the executor gives a placement of a long stream: the
// operations from the window's start, the state before them and the
// incoming ids held before it, read from the replica's stream. It reports
// how many operations it read.
func (r *replica) windowed(maxSkip int64, incoming []place.Incoming) (place.Stored, int64) {
	r.t.Helper()
	var read int64
	// The executor starts at the keyframe before the window's start.
	start := place.WindowStart(int64(len(r.stored)), maxSkip)
	start = max(0, start-int64(r.rng.IntN(4)))
	from, ops, err := place.Window(start, int64(len(r.stored)), func(from, to int64) ([]oplog.Operation, error) {
		read += to - from
		return slices.Clone(r.stored[from:to]), nil
	})
	require.NoError(r.t, err)
	w := place.Stored{From: from, Ops: ops}
	if from > 0 {
		w.Before, err = r.reg.ReplayStream(global, jsondoc.DocumentType, r.stored[:from])
		require.NoError(r.t, err)
		w.Held = map[string][]int64{}
		for _, in := range incoming {
			for i := range r.stored[:from] {
				if r.stored[i].OpID == in.OpID {
					w.Held[in.OpID] = append(w.Held[in.OpID], int64(i))
				}
			}
		}
	}
	return w, read
}

// A placement from a window (the operations from maxSkip+1 behind the head
// or a little before, as from a keyframe, extended back over any skip
// reaching before it, with the state before them and the incoming ids held
// before it) decides as the
// placement from index 0 does: the same plan, the same operations and
// hashes, the same refusal. Seeded cases of loads from interleaving
// origins, resends included, and backdated ordinary jobs, on streams
// several times the threshold long.
func TestWindowedPlacementEqualsWhole(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	windows, refusals, placements := 0, 0, 0
	names := map[string]int{}
	windowedShuffles := 0
	var readWhole, readWindow int64
	for c := range 8 {
		maxSkip := int64(4 + rng.IntN(7))
		origins := 2 + rng.IntN(2)
		var chains [][]place.Incoming
		for o := range origins {
			src := newReplica(t)
			var ops []place.Incoming
			for k := range 15 + rng.IntN(10) {
				ops = append(ops, entry(fmt.Sprintf("c%d-o%d-%d", c, o, k), int64(k*10+o*3+rng.IntN(3))))
			}
			src.mustCommit(place.Ordinary(global, place.Whole(src.stored), ops, 1000))
			chains = append(chains, asLoad(src.stored))
		}
		r := newReplica(t)
		r.rng = rng
		next := make([]int, origins)
		for step := 0; step < 120; step++ {
			var incoming []place.Incoming
			load := rng.IntN(5) > 0
			if load {
				o := rng.IntN(origins)
				if rng.IntN(4) > 0 { // mostly the origin furthest behind, so they interleave
					for k := range origins {
						if next[k] < next[o] {
							o = k
						}
					}
				}
				if next[o] >= len(chains[o]) {
					continue
				}
				from := max(0, next[o]-rng.IntN(3))
				if rng.IntN(10) == 0 {
					from = 0 // a full resend
				}
				to := min(len(chains[o]), next[o]+1+rng.IntN(3))
				incoming = chains[o][from:to]
			} else {
				var latest int64
				if len(r.stored) > 0 {
					latest = r.stored[len(r.stored)-1].TimestampUtcMs
				}
				ts := latest - int64(rng.IntN(40)) + 5 // mostly backdated a little
				incoming = []place.Incoming{entry(fmt.Sprintf("c%d-j%d", c, step), ts)}
			}
			whole := place.Whole(r.stored)
			w, read := r.windowed(maxSkip, incoming)
			readWhole += int64(len(r.stored))
			readWindow += read
			if w.From > 0 {
				windows++
			}
			plan := func(s place.Stored) (*place.Plan, []oplog.Operation, error) {
				var p *place.Plan
				var err error
				if load {
					p, err = place.Load(global, s, incoming, maxSkip)
				} else {
					p, err = place.Ordinary(global, s, incoming, maxSkip)
				}
				if err != nil || len(p.Tail) == 0 {
					return p, nil, err
				}
				ops, _, err := place.Derive(r.reg, r.doc, r.head, s, p)
				return p, ops, err
			}
			pw, opsW, errW := plan(w)
			p0, ops0, err0 := plan(whole)
			if err0 != nil {
				require.Error(t, errW, "case %d step %d", c, step)
				require.Equal(t, oplog.ErrorName(err0), oplog.ErrorName(errW), "case %d step %d: %v / %v", c, step, err0, errW)
				require.NotEmpty(t, oplog.ErrorName(errW), "case %d step %d: a refusal by name: %v", c, step, errW)
				refusals++
				names[oplog.ErrorName(err0)]++
				continue
			}
			require.NoError(t, errW, "case %d step %d", c, step)
			require.Equal(t, p0, pw, "case %d step %d: the same plan", c, step)
			require.Equal(t, ops0, opsW, "case %d step %d: the same operations", c, step)
			_, err := r.commit(p0, nil)
			require.NoError(t, err)
			placements++
			if p0.Reshuffles() && w.From > 0 {
				windowedShuffles++
			}
			for o := range chains {
				for next[o] < len(chains[o]) && slices.ContainsFunc(r.stored, func(op oplog.Operation) bool { return op.OpID == chains[o][next[o]].OpID }) {
					next[o]++
				}
			}
		}
		r.verify()
	}
	require.Greater(t, windows, 0, "placements read windows")
	require.Greater(t, refusals, 0, "some are refused")
	require.Greater(t, placements, 0)
	require.Greater(t, windowedShuffles, 0)
	t.Logf("%d placements (%d reshuffles from a window), %d refusals %v, %d from a window; %d operations read from windows where reads from index 0 read %d", placements, windowedShuffles, refusals, names, windows, readWindow, readWhole)
}
