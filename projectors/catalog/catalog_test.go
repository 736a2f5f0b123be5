package catalog_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/ledger"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/catalog"
)

type noop struct{}

func (noop) Name() string                                                    { return "catalog_test_noop" }
func (noop) Filter() projectors.Filter                                       { return projectors.Filter{} }
func (noop) Apply(context.Context, projectors.Tx, []projectors.Change) error { return nil }

func open(context.Context, catalog.Options) (projectors.Projector, func(), error) {
	return noop{}, func() {}, nil
}

// A registered spec is listed, looked up and, when Default, run by default
// like a built-in one; an invalid or duplicate one is refused with a typed
// error that says why.
func TestRegister(t *testing.T) {
	before := catalog.Names()
	require.NoError(t, catalog.Register(catalog.Spec{Name: "catalog_test_noop", Summary: "nothing", Default: true, Open: open}))
	require.Equal(t, append(before, "catalog_test_noop"), catalog.Names(), "after the built-in ones")
	spec, err := catalog.Lookup("catalog_test_noop")
	require.NoError(t, err)
	require.Equal(t, "nothing", spec.Summary)
	require.True(t, slices.Contains(catalog.Defaults(), "catalog_test_noop"))
	require.Len(t, catalog.All(), len(before)+1)

	var dup *catalog.DuplicateError
	require.ErrorAs(t, catalog.Register(catalog.Spec{Name: "catalog_test_noop", Open: open}), &dup)
	require.ErrorAs(t, catalog.Register(catalog.Spec{Name: "docview", Open: open}), &dup, "a built-in name")
	require.ErrorContains(t, dup, `projector "docview" is in the catalog already`)

	var invalid *catalog.InvalidSpecError
	for _, name := range []string{"", "Balances", "1st", "with-dash", "a b", "x23456789012345678901234567890123456789012"} {
		require.ErrorAs(t, catalog.Register(catalog.Spec{Name: name, Open: open}), &invalid, "name %q", name)
		require.Contains(t, invalid.Reason, "lower-case letters")
	}
	require.ErrorAs(t, catalog.Register(catalog.Spec{Name: "no_open"}), &invalid)
	require.Contains(t, invalid.Error(), "no Open")
	require.Len(t, catalog.All(), len(before)+1, "nothing refused was added")

	var unknown *catalog.UnknownError
	_, err = catalog.Lookup("nope")
	require.ErrorAs(t, err, &unknown)
	require.ErrorContains(t, err, "catalog_test_noop")

	// A spec's models join the built-in ones in the registry every process
	// that runs or operates projectors builds.
	counter := model.MustSpec(model.Spec{
		DocumentType: "catalog_test/counter", ModelVersion: 1,
		Initial: map[string]func() any{oplog.ScopeGlobal: func() any { return 0.0 }},
		ActionList: []*model.ActionSpec{{
			Type: "INCREMENT", Scopes: []string{oplog.ScopeGlobal}, Description: "Adds one.", Input: "{}",
			Decode: func(json.RawMessage) (any, error) { return nil, nil },
			Reduce: func(state any, _ *model.Call) (any, error) { return state.(float64) + 1, nil },
		}},
	})
	require.NoError(t, catalog.Register(catalog.Spec{Name: "catalog_test_counter", Open: open, Models: []model.Model{counter}}))
	reg, err := catalog.Registry()
	require.NoError(t, err)
	_, err = reg.Get("catalog_test/counter", 1)
	require.NoError(t, err)
	_, err = reg.Get(ledger.DocumentType, 1)
	require.NoError(t, err, "and the built-in ones")
}
