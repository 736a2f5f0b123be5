// Package modeltest is a harness for testing document models: it applies
// actions to one document as the executor would, records the operations they
// become, checks the SDK's contracts on every step (a refused action leaves
// the state intact, every operation's hash is the hash of the state after
// it) and replays the recorded streams to prove they reproduce every hash.
// Model authors use it in their own tests.
package modeltest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// Doc is one document under test.
type Doc struct {
	T       testing.TB
	Reg     *model.Registry
	ID      string
	Type    string
	Branch  string
	JobID   string
	States  map[string]*model.StreamState
	Ops     map[string][]oplog.Operation
	Clock   int64
	actions int
}

// New starts a document of docType, not yet created.
func New(t testing.TB, reg *model.Registry, docType string) *Doc {
	return &Doc{
		T: t, Reg: reg, ID: "doc-" + t.Name(), Type: docType, Branch: oplog.DefaultBranch,
		JobID: "job-" + t.Name(), States: map[string]*model.StreamState{}, Ops: map[string][]oplog.Operation{},
		Clock: 1_700_000_000_000,
	}
}

// Created starts a document and applies CREATE_DOCUMENT.
func Created(t testing.TB, reg *model.Registry, docType string) *Doc {
	d := New(t, reg, docType)
	d.Must(oplog.ScopeDocument, model.ActionCreateDocument, map[string]any{"name": "test"})
	return d
}

// Stream returns the state of a scope, empty if nothing was applied to it.
func (d *Doc) Stream(scope string) *model.StreamState {
	st, ok := d.States[scope]
	if !ok {
		st = model.NewStreamState(oplog.StreamKey{DocumentID: d.ID, Scope: scope, Branch: d.Branch}, d.Type)
		d.States[scope] = st
	}
	return st
}

// State returns the JSON state of a scope.
func (d *Doc) State(scope string) any { return d.Stream(scope).State }

// Action builds an action; input is marshalled unless it is already
// json.RawMessage.
func (d *Doc) Action(scope, typ string, input any) oplog.Action {
	raw, ok := input.(json.RawMessage)
	if !ok && input != nil {
		b, err := json.Marshal(input)
		require.NoError(d.T, err)
		raw = b
	}
	d.actions++
	d.Clock += 1000
	return oplog.Action{ID: fmt.Sprintf("a%d", d.actions), Type: typ, Scope: scope, TimestampUtcMs: d.Clock, Input: raw}
}

// Apply applies one action. On success it records the operation; on error it
// checks the SDK's contract: the state is unchanged unless it is poisoned,
// and a poisoned state is rebuilt from the recorded operations.
func (d *Doc) Apply(scope, typ string, input any) error {
	return d.ApplyAction(d.Action(scope, typ, input))
}

// ApplyAction is Apply for a prepared action.
func (d *Doc) ApplyAction(a oplog.Action) error {
	st := d.Stream(a.Scope)
	before := st.Clone()
	res, err := d.Reg.Apply(d.Stream(oplog.ScopeDocument), st, &a)
	if err != nil {
		if st.Poisoned() {
			d.rebuild(a.Scope)
		} else {
			require.Equal(d.T, before.Revision, st.Revision, "a refused action must not advance the stream")
			require.True(d.T, model.EqualJSON(before.State, st.State), "a refused action must leave the state intact (%v)", err)
		}
		return err
	}
	// The hash Apply computed (incrementally, when the action declares
	// what it touches) is the full recomputation's; and the state before,
	// which a declared action shares, is as it was: the reducer changed
	// nothing outside its declared paths.
	h, _, herr := model.Hash(st.State)
	require.NoError(d.T, herr)
	require.Equal(d.T, h, res.Hash)
	if before.Revision > 0 && before.Hash != "" {
		hb, _, herr := model.Hash(before.State)
		require.NoError(d.T, herr)
		require.Equal(d.T, before.Hash, hb, "%s changed the state outside the paths it declares (ActionSpec.Touches)", a.Type)
	}
	n := len(d.Ops[a.Scope])
	require.Equal(d.T, int64(n), res.Index)
	d.Ops[a.Scope] = append(d.Ops[a.Scope], oplog.Operation{
		OpID: model.OpID(d.JobID, d.actions), JobID: d.JobID, DocumentID: d.ID, DocumentType: d.Type,
		Scope: a.Scope, Branch: d.Branch, Index: res.Index, Hash: res.Hash, TimestampUtcMs: a.TimestampUtcMs,
		Version: res.Version, Action: a,
	})
	return nil
}

// Must applies an action that has to succeed.
func (d *Doc) Must(scope, typ string, input any) {
	d.T.Helper()
	require.NoError(d.T, d.Apply(scope, typ, input))
}

func (d *Doc) rebuild(scope string) {
	st, err := d.Reg.ReplayStream(d.Stream(scope).Stream, d.Type, d.Ops[scope])
	require.NoError(d.T, err)
	d.States[scope] = st
}

// VerifyReplay replays every stream from index 0, which checks every stored
// hash, and compares the result with the live state.
func (d *Doc) VerifyReplay() {
	d.T.Helper()
	for scope, ops := range d.Ops {
		st, err := d.Reg.ReplayStream(d.Stream(scope).Stream, d.Type, ops)
		require.NoError(d.T, err, "replay %s", scope)
		live := d.Stream(scope)
		require.Equal(d.T, live.Revision, st.Revision)
		require.Equal(d.T, live.Hash, st.Hash)
		require.Equal(d.T, live.Version, st.Version)
		require.True(d.T, model.EqualJSON(live.State, st.State), "replayed %s state differs", scope)
	}
}

// Case is one step of a table test: an action and what it must do.
type Case struct {
	Name   string
	Scope  string // default global
	Type   string
	Input  any
	ErrIs  string // the error's stable name, "" for success
	ErrMsg string // a substring of the error message
	Check  func(t testing.TB, d *Doc)
}

// Run applies the cases in order to one document, so later cases see the
// state earlier ones left, then verifies a full replay.
func Run(t *testing.T, d *Doc, cases []Case) {
	t.Helper()
	for _, c := range cases {
		scope := c.Scope
		if scope == "" {
			scope = oplog.ScopeGlobal
		}
		err := d.Apply(scope, c.Type, c.Input)
		if c.ErrIs == "" {
			require.NoError(t, err, c.Name)
		} else {
			require.Error(t, err, c.Name)
			require.Equal(t, c.ErrIs, model.ErrorName(err), "%s: %v", c.Name, err)
			require.Contains(t, err.Error(), c.ErrMsg, c.Name)
		}
		if c.Check != nil {
			c.Check(t, d)
		}
	}
	d.VerifyReplay()
}
