package model_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/ledger"
	"github.com/doclog/doclog/model/modeltest"
)

// A new action naming something in the document scope (a document's name
// and slug, a relationship's target and type) is held to the log's text
// rule; the refusal names the input field and wraps the rule's error, so the
// ingest API can point at it. Stored streams are not.
func TestInputNamesAreSafeText(t *testing.T) {
	t.Parallel()
	d := modeltest.Created(t, builtins(t), ledger.DocumentType)
	for _, tc := range []struct {
		action     string
		input      map[string]any
		field, msg string
	}{
		{model.ActionSetName, map[string]any{"name": "Q4\x1b]0;pwned\x07"}, "name", "name contains a control character (U+001B at byte 2)"},
		{model.ActionSetSlug, map[string]any{"slug": "a\u202eb"}, "slug", "slug contains a bidirectional formatting character (U+202E at byte 1)"},
		{model.ActionAddRelationship, map[string]any{"targetId": "c\r1"}, "targetId", "targetId contains a control character (U+000D at byte 1)"},
		{model.ActionAddRelationship, map[string]any{"targetId": "c1", "type": "ref\u2066"}, "type", "type contains a bidirectional formatting character (U+2066 at byte 3)"},
	} {
		err := d.Apply(doc, tc.action, tc.input)
		require.Equal(t, model.NameInvalidInput, model.ErrorName(err), "%s %v", tc.action, tc.input)
		var ii *model.InvalidInput
		require.ErrorAs(t, err, &ii)
		require.Equal(t, tc.field, ii.Field)
		require.Equal(t, tc.msg, ii.Reason)
		var ut *oplog.UnsafeTextError
		require.ErrorAs(t, err, &ut)
	}
	for _, a := range model.SystemActions() {
		if a.Type == model.ActionCreateDocument {
			_, err := a.Validate(json.RawMessage(`{"name":"x\u0007"}`))
			require.ErrorContains(t, err, "name contains a control character (U+0007 at byte 1)")
		}
	}
	d.Must(doc, model.ActionSetName, map[string]any{"name": "Q4 ledger — été 😀"})
	require.Equal(t, "Q4 ledger — été 😀", info(t, d).Name)
	requireOldStreamsReplay(t, builtins(t))
}

// requireOldStreamsReplay checks that the rule is for new actions: a stream
// written before it, holding a name the rule now refuses, still replays to
// the same hashes, and the link it added can still be removed.
func requireOldStreamsReplay(t *testing.T, reg *model.Registry) {
	t.Helper()
	d := modeltest.Created(t, reg, ledger.DocumentType)
	hostile := "Q4\x1b]0;pwned\x07"
	// Each state as an older doclog let it be written: the placeholder
	// replaced by the hostile text.
	var states []any
	snapshot := func() {
		raw, err := json.Marshal(d.State(doc))
		require.NoError(t, err)
		raw = []byte(strings.ReplaceAll(string(raw), "placeholder", `Q4\u001b]0;pwned\u0007`))
		var v any
		require.NoError(t, json.Unmarshal(raw, &v))
		states = append(states, v)
	}
	d.Must(doc, model.ActionSetName, map[string]any{"name": "placeholder"})
	snapshot()
	d.Must(doc, model.ActionAddRelationship, map[string]any{"targetId": "placeholder"})
	snapshot()
	ops := d.Ops[doc]
	require.Len(t, ops, 3)
	ops[1].Action.Input = json.RawMessage(`{"name":"Q4\u001b]0;pwned\u0007"}`)
	ops[2].Action.Input = json.RawMessage(`{"targetId":"Q4\u001b]0;pwned\u0007"}`)
	for i, state := range states {
		var err error
		ops[i+1].Hash, _, err = model.Hash(state)
		require.NoError(t, err)
	}

	st, err := reg.ReplayStream(d.Stream(doc).Stream, ledger.DocumentType, ops)
	require.NoError(t, err, "a stored stream replays whatever the rules for new actions say")
	replayed, ok := model.DocumentInfoOf(st)
	require.True(t, ok)
	require.Equal(t, hostile, replayed.Name)

	a := d.Action(doc, model.ActionRemoveRelationship, map[string]any{"targetId": hostile})
	_, err = reg.Apply(st, st, &a)
	require.NoError(t, err, "an old link can be removed")
}
