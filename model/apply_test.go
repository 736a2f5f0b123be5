package model_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/modeltest"
)

const counterType = "test/counter"

type incInput struct {
	By int `json:"by"`
}

// counterV1 keeps {"count": n} and accepts INCREMENT; v2 renames the field to
// "total" and replaces INCREMENT with ADD, which also counts the additions.
// A reducer that ran at the wrong version would fail or hash differently.
func counterModels(t testing.TB) *model.Registry {
	t.Helper()
	v1 := model.MustSpec(model.Spec{
		DocumentType: counterType, ModelVersion: 1,
		Initial: map[string]func() any{oplog.ScopeGlobal: func() any { return map[string]any{"count": 0.0} }},
		ActionList: []*model.ActionSpec{{
			Type: "INCREMENT", Scopes: []string{oplog.ScopeGlobal},
			Decode: model.DecodeInput[incInput](nil),
			Reduce: func(s any, c *model.Call) (any, error) {
				m := s.(map[string]any)
				m["count"] = m["count"].(float64) + float64(c.Input.(*incInput).By)
				return m, nil
			},
		}, {
			Type: "PANIC", Scopes: []string{oplog.ScopeGlobal},
			Reduce: func(s any, c *model.Call) (any, error) {
				s.(map[string]any)["count"] = -1.0
				panic("boom")
			},
		}, {
			Type: "NOT_JSON", Scopes: []string{oplog.ScopeGlobal},
			Reduce: func(s any, c *model.Call) (any, error) {
				s.(map[string]any)["bad"] = math.NaN()
				return s, nil
			},
		}, {
			Type: "PLAIN_ERROR", Scopes: []string{oplog.ScopeGlobal},
			Reduce: func(s any, c *model.Call) (any, error) { return nil, errors.New("disk on fire") },
		}},
	})
	v2 := model.MustSpec(model.Spec{
		DocumentType: counterType, ModelVersion: 2,
		Initial: map[string]func() any{oplog.ScopeGlobal: func() any { return map[string]any{"total": 0.0, "adds": 0.0} }},
		ActionList: []*model.ActionSpec{{
			Type: "ADD", Scopes: []string{oplog.ScopeGlobal},
			Decode: model.DecodeInput[incInput](nil),
			Reduce: func(s any, c *model.Call) (any, error) {
				m := s.(map[string]any)
				m["total"] = m["total"].(float64) + float64(c.Input.(*incInput).By)
				m["adds"] = m["adds"].(float64) + 1
				return m, nil
			},
		}},
	})
	r, err := model.NewRegistry(v1, v2)
	require.NoError(t, err)
	require.NoError(t, r.RegisterUpgrades(model.UpgradeManifest{DocumentType: counterType, Transitions: []model.UpgradeTransition{{
		From: 1, To: 2,
		Upgrade: func(scope string, s any) (any, error) {
			m := s.(map[string]any)
			return map[string]any{"total": m["count"], "adds": 0.0}, nil
		},
	}}}))
	return r
}

func TestUpgradeDocument(t *testing.T) {
	t.Parallel()
	r := counterModels(t)
	d := modeltest.New(t, r, counterType)
	d.Must(doc, model.ActionCreateDocument, map[string]any{"version": 1})
	d.Must(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": 2})
	d.Must(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": 3})
	require.Equal(t, model.NameUnknownActionType, model.ErrorName(d.Apply(oplog.ScopeGlobal, "ADD", map[string]any{"by": 1})))

	d.Must(doc, model.ActionUpgradeDocument, map[string]any{"fromVersion": 1, "toVersion": 2})
	require.Equal(t, 2, d.Stream(doc).Version)
	err := d.Apply(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": 1})
	require.Equal(t, model.NameUnknownActionType, model.ErrorName(err), "v1's actions are gone at v2: %v", err)
	require.Contains(t, err.Error(), "test/counter v2")
	// The global state is still at v1 until its next action upgrades it.
	require.Equal(t, 1, d.Stream(oplog.ScopeGlobal).Version)

	d.Must(oplog.ScopeGlobal, "ADD", map[string]any{"by": 10})
	require.Equal(t, map[string]any{"total": 15.0, "adds": 1.0}, d.State(oplog.ScopeGlobal))
	require.Equal(t, 2, d.Stream(oplog.ScopeGlobal).Version)

	versions := func(scope string) []int {
		var out []int
		for _, op := range d.Ops[scope] {
			out = append(out, op.Version)
		}
		return out
	}
	require.Equal(t, []int{1, 1, 2}, versions(oplog.ScopeGlobal))
	require.Equal(t, []int{1, 2}, versions(doc))
	require.Equal(t, 2, r.Versions(counterType)[1])
	d.VerifyReplay()

	// The path is reported whole, and a downgrade is refused.
	path, err := r.UpgradePath(counterType, 1, 2)
	require.NoError(t, err)
	require.Len(t, path, 1)
	_, err = r.UpgradePath(counterType, 2, 1)
	require.Equal(t, model.NameDowngradeNotSupported, model.ErrorName(err))
	require.Equal(t, model.NameDowngradeNotSupported, model.ErrorName(d.Apply(doc, model.ActionUpgradeDocument, map[string]any{"toVersion": 1})))
}

func TestCreateDefaultsToLatestAndReplayKeepsRecordedVersion(t *testing.T) {
	t.Parallel()
	r := counterModels(t)
	d := modeltest.New(t, r, counterType)
	d.Must(doc, model.ActionCreateDocument, nil)
	require.Equal(t, 2, d.Ops[doc][0].Version)
	d.Must(oplog.ScopeGlobal, "ADD", map[string]any{"by": 1})
	d.VerifyReplay()
}

func TestReducerPanicIsRecovered(t *testing.T) {
	t.Parallel()
	r := counterModels(t)
	d := modeltest.New(t, r, counterType)
	d.Must(doc, model.ActionCreateDocument, map[string]any{"version": 1})
	d.Must(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": 4})

	st := d.Stream(oplog.ScopeGlobal)
	a := d.Action(oplog.ScopeGlobal, "PANIC", nil)
	_, err := r.Apply(d.Stream(doc), st, &a)
	var re *model.ReducerError
	require.ErrorAs(t, err, &re)
	require.True(t, re.Panic)
	require.Equal(t, "PANIC", re.ActionType)
	require.Equal(t, int64(1), re.Index)
	require.Contains(t, err.Error(), "reducer panicked: boom")
	require.True(t, st.Poisoned())

	// A poisoned state is refused until it is reloaded.
	a = d.Action(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": 1})
	_, err = r.Apply(d.Stream(doc), st, &a)
	require.Equal(t, model.NameReducerError, model.ErrorName(err))
	require.Contains(t, err.Error(), "must be reloaded")
}

func TestReducerFailuresAreTyped(t *testing.T) {
	t.Parallel()
	d := modeltest.New(t, counterModels(t), counterType)
	d.Must(doc, model.ActionCreateDocument, map[string]any{"version": 1})
	err := d.Apply(oplog.ScopeGlobal, "NOT_JSON", nil)
	require.Equal(t, model.NameReducerError, model.ErrorName(err))
	var uv *model.UnsupportedValue
	require.ErrorAs(t, err, &uv)
	require.Equal(t, "/bad", uv.Path)

	err = d.Apply(oplog.ScopeGlobal, "PLAIN_ERROR", nil)
	require.Equal(t, model.NameReducerError, model.ErrorName(err))
	require.Contains(t, err.Error(), "reducer failed: disk on fire")
	d.Must(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": 1})
	d.VerifyReplay()
}

func TestRegistryErrors(t *testing.T) {
	t.Parallel()
	r := counterModels(t)
	_, err := r.Get("nope", 1)
	var mnf *model.ModelNotFound
	require.ErrorAs(t, err, &mnf)
	require.Equal(t, "nope", mnf.DocumentType)
	require.Equal(t, 1, mnf.Version)
	_, err = r.Latest("nope")
	require.ErrorAs(t, err, &mnf)
	require.Equal(t, 0, mnf.Version)
	m, err := r.Latest(counterType)
	require.NoError(t, err)
	require.Equal(t, 2, m.Version())
	require.ErrorContains(t, r.Register(m), "version 2 is already registered")
	require.ErrorContains(t, r.RegisterUpgrades(model.UpgradeManifest{DocumentType: counterType, Transitions: []model.UpgradeTransition{{From: 1, To: 3}}}), "must go from a version to the next")
	require.ErrorContains(t, r.RegisterUpgrades(model.UpgradeManifest{DocumentType: counterType, Transitions: []model.UpgradeTransition{{From: 1, To: 2}}}), "already registered")
	_, err = r.UpgradePath(counterType, 2, 3)
	var mut *model.MissingUpgradeTransition
	require.ErrorAs(t, err, &mut)
	require.Equal(t, [2]int{2, 3}, [2]int{mut.From, mut.To})
	require.Equal(t, []string{counterType}, r.Types())
	require.Len(t, r.Manifest(counterType).Transitions, 1)
	_, err = model.NewSpec(model.Spec{DocumentType: "x", ModelVersion: 1, ActionList: []*model.ActionSpec{{Type: model.ActionSetName, Scopes: []string{"global"}}}})
	require.ErrorContains(t, err, "is a system action")
}

func TestReplayDetectsTampering(t *testing.T) {
	t.Parallel()
	d := modeltest.New(t, counterModels(t), counterType)
	d.Must(doc, model.ActionCreateDocument, map[string]any{"version": 1})
	for i := range 5 {
		d.Must(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": i})
	}
	ops := append([]oplog.Operation(nil), d.Ops[oplog.ScopeGlobal]...)
	ops[3].Action.Input = []byte(`{"by":99}`)
	_, err := d.Reg.ReplayStream(ops[0].Stream(), counterType, ops)
	var hm *model.HashMismatch
	require.ErrorAs(t, err, &hm)
	require.Equal(t, int64(3), hm.Index)
	require.Equal(t, ops[3].Hash, hm.Expected)
	require.NotEqual(t, hm.Expected, hm.Actual)
	require.Equal(t, ops[0].Stream(), hm.Stream)

	_, err = d.Reg.ReplayStream(ops[0].Stream(), counterType, d.Ops[oplog.ScopeGlobal][1:])
	var gap *model.StreamGap
	require.ErrorAs(t, err, &gap)
	require.Equal(t, [2]int64{0, 1}, [2]int64{gap.Expected, gap.Got})
}

func TestKeyframeRoundTrip(t *testing.T) {
	t.Parallel()
	d := modeltest.New(t, counterModels(t), counterType)
	d.Must(doc, model.ActionCreateDocument, map[string]any{"version": 1})
	for i := range 4 {
		d.Must(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": i})
	}
	kf, err := d.Stream(oplog.ScopeGlobal).Keyframe()
	require.NoError(t, err)
	require.Equal(t, int64(3), kf.Index)
	st, err := model.FromKeyframe(kf)
	require.NoError(t, err)
	want := d.Stream(oplog.ScopeGlobal)
	require.Equal(t, []any{want.Stream, want.DocumentType, want.Revision, want.Version, want.State, want.Hash, want.Size},
		[]any{st.Stream, st.DocumentType, st.Revision, st.Version, st.State, st.Hash, st.Size})

	kf.State = []byte(`{"count":7}`)
	_, err = model.FromKeyframe(kf)
	require.Equal(t, model.NameHashMismatch, model.ErrorName(err))
}

// An operation with skip n supersedes the n operations before it.
func TestReplayHonoursSkip(t *testing.T) {
	t.Parallel()
	d := modeltest.New(t, counterModels(t), counterType)
	d.Must(doc, model.ActionCreateDocument, map[string]any{"version": 1})
	for _, by := range []int{1, 10, 100, 1000} {
		d.Must(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": by})
	}
	ops := append([]oplog.Operation(nil), d.Ops[oplog.ScopeGlobal]...)
	stream := ops[0].Stream()

	// Op 4 skips ops 2 and 3: its state is ops 0, 1 and itself.
	expect, err := d.Reg.ReplayStream(stream, counterType, ops[:2])
	require.NoError(t, err)
	a := d.Action(oplog.ScopeGlobal, "INCREMENT", map[string]any{"by": 5})
	expect.Revision = 4
	res, err := d.Reg.Apply(d.Stream(doc), expect, &a)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"count": 16.0}, expect.State)
	ops = append(ops, oplog.Operation{OpID: "x", JobID: "j", DocumentID: d.ID, DocumentType: counterType, Scope: oplog.ScopeGlobal,
		Branch: d.Branch, Index: 4, Skip: 2, Hash: res.Hash, Version: 1, Action: a})

	st, err := d.Reg.ReplayStream(stream, counterType, ops)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"count": 16.0}, st.State)
	require.Equal(t, int64(5), st.Revision)

	// From a keyframe after op 2, the skip reaches before the start.
	kfState, err := d.Reg.ReplayStream(stream, counterType, ops[:3])
	require.NoError(t, err)
	err = d.Reg.Replay(kfState, ops[3:])
	var sbs *model.SkipBeforeStart
	require.ErrorAs(t, err, &sbs)
	require.Equal(t, int64(3), sbs.StartIndex)
}

// Property: for random action sequences of every built-in model, the state at
// any revision equals a full replay of the operations up to it, a keyframe
// there plus the rest equals the full replay, and every operation's hash is
// the hash of the replayed state (Replay checks each one).
func TestPropertyReplayEqualsLive(t *testing.T) {
	t.Parallel()
	r := builtins(t)
	for _, gen := range generators {
		t.Run(gen.docType, func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(8) {
				rng := rand.New(rand.NewPCG(seed, 7))
				d := modeltest.Created(t, r, gen.docType)
				type snap struct {
					rev   int64
					state *model.StreamState
				}
				var snaps []snap
				for range 60 {
					typ, input := gen.next(rng)
					_ = d.Apply(oplog.ScopeGlobal, typ, input) // refusals are part of the sequence
					if rng.IntN(5) == 0 {
						st := d.Stream(oplog.ScopeGlobal)
						snaps = append(snaps, snap{st.Revision, st.Clone()})
					}
				}
				ops := d.Ops[oplog.ScopeGlobal]
				require.NotEmpty(t, ops, "seed %d produced no operation", seed)
				stream := d.Stream(oplog.ScopeGlobal).Stream
				for _, s := range snaps {
					replayed, err := r.ReplayStream(stream, gen.docType, ops[:s.rev])
					require.NoError(t, err)
					require.Equal(t, s.state.Hash, replayed.Hash, "seed %d revision %d", seed, s.rev)
					require.True(t, model.EqualJSON(s.state.State, replayed.State))
					if s.rev == 0 {
						continue
					}
					kf, err := replayed.Keyframe()
					require.NoError(t, err)
					fromKf, err := model.FromKeyframe(kf)
					require.NoError(t, err)
					require.NoError(t, r.Replay(fromKf, ops[s.rev:]))
					require.Equal(t, d.Stream(oplog.ScopeGlobal).Hash, fromKf.Hash)
				}
				d.VerifyReplay()
			}
		})
	}
}

type generator struct {
	docType string
	next    func(rng *rand.Rand) (string, any)
}

var generators = []generator{
	{"doclog/ledger", func(rng *rand.Rand) (string, any) {
		acct := func() string { return fmt.Sprintf("acc%d", rng.IntN(4)) }
		switch rng.IntN(5) {
		case 0:
			return "OPEN_ACCOUNT", map[string]any{"accountId": acct(), "initialBalance": rng.IntN(100)}
		case 1:
			return "DEPOSIT", map[string]any{"accountId": acct(), "amount": 1 + rng.IntN(50)}
		case 2:
			return "WITHDRAW", map[string]any{"accountId": acct(), "amount": 1 + rng.IntN(80)}
		case 3:
			return "TRANSFER", map[string]any{"fromAccountId": acct(), "toAccountId": acct(), "amount": 1 + rng.IntN(60)}
		}
		return "CLOSE_ACCOUNT", map[string]any{"accountId": acct()}
	}},
	{"doclog/drive", func(rng *rand.Rand) (string, any) {
		id := func() string { return fmt.Sprintf("n%d", rng.IntN(8)) }
		parent := func() string {
			if rng.IntN(3) == 0 {
				return ""
			}
			return id()
		}
		switch rng.IntN(6) {
		case 0, 1:
			return "ADD_FOLDER", map[string]any{"id": id(), "name": "f", "parentFolder": parent()}
		case 2:
			return "ADD_FILE", map[string]any{"id": id(), "name": "x.md", "parentFolder": parent(), "documentId": "d" + id()}
		case 3:
			return "MOVE_NODE", map[string]any{"id": id(), "parentFolder": parent()}
		case 4:
			return "RENAME_NODE", map[string]any{"id": id(), "name": fmt.Sprint(rng.IntN(100))}
		}
		return "DELETE_NODE", map[string]any{"id": id()}
	}},
	{"doclog/json", func(rng *rand.Rand) (string, any) {
		key := func() string { return []string{"a", "b", "é", "\U0001F600", "\uFF21"}[rng.IntN(5)] }
		val := func() any {
			switch rng.IntN(4) {
			case 0:
				return rng.Float64() * 1e22
			case 1:
				return map[string]any{key(): rng.IntN(10)}
			case 2:
				return []any{1, "x", nil}
			}
			return nil
		}
		if rng.IntN(2) == 0 {
			return "MERGE_PATCH", map[string]any{key(): val(), key(): map[string]any{key(): val()}}
		}
		return "JSON_PATCH", []any{
			map[string]any{"op": []string{"add", "remove", "replace", "test", "copy", "move"}[rng.IntN(6)],
				"path": "/" + key(), "from": "/" + key(), "value": val()},
		}
	}},
}
