package builtin_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
)

func TestRegistryHoldsBuiltins(t *testing.T) {
	t.Parallel()
	r, err := builtin.NewRegistry()
	require.NoError(t, err)
	require.Equal(t, []string{"doclog/drive", "doclog/json", "doclog/ledger"}, r.Types())
	for _, m := range builtin.Models() {
		require.NotEmpty(t, m.Actions(), m.Type())
		for _, a := range m.Actions() {
			require.NotEmpty(t, a.Description, a.Type)
			require.NotEmpty(t, a.Input, a.Type)
		}
	}
	require.Error(t, builtin.Register(r), "registering twice must fail")
}

// Fuzz: decoding any input for any action of any built-in model, and of the
// system scope, never panics and fails only with InvalidInput.
func FuzzDecodeAction(f *testing.F) {
	f.Add(uint8(0), `{"accountId":"a","amount":5}`)
	f.Add(uint8(3), `{"id":"n","name":"x","documentId":"d"}`)
	f.Add(uint8(7), `[{"op":"add","path":"/a","value":1}]`)
	f.Add(uint8(9), `{"targetId":"t","metadata":{"k":[1]}}`)
	f.Add(uint8(11), `{"slug":"a-b"}`)
	f.Add(uint8(2), `{"toVersion":2,"fromVersion":1}`)
	f.Add(uint8(5), "\x00")
	var specs []*model.ActionSpec
	for _, m := range builtin.Models() {
		specs = append(specs, m.Actions()...)
	}
	specs = append(specs, model.SystemActions()...)
	f.Fuzz(func(t *testing.T, which uint8, input string) {
		spec := specs[int(which)%len(specs)]
		v, err := spec.Decode(json.RawMessage(input))
		if err != nil {
			require.Equal(t, model.NameInvalidInput, model.ErrorName(err), "%s: %v", spec.Type, err)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotNil(t, v, spec.Type)
	})
}
