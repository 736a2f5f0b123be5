package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/modeltest"
)

// A reducer's error keeps its name only when it is one of the model's own:
// every other error, named by another package or not, is undeclared and is
// reported as a ReducerError, so a reducer cannot pass off a log conflict
// (which the executor would retry) as its verdict.
func TestOnlyTheModelsErrorsPassThroughApply(t *testing.T) {
	t.Parallel()
	const typ = "test/declared"
	spec := model.MustSpec(model.Spec{
		DocumentType: typ, ModelVersion: 1,
		Initial: map[string]func() any{oplog.ScopeGlobal: func() any { return map[string]any{} }},
		ActionList: []*model.ActionSpec{{
			Type: "CONFLICT", Scopes: []string{oplog.ScopeGlobal},
			Reduce: func(any, *model.Call) (any, error) { return nil, &oplog.RevisionMismatch{} },
		}, {
			Type: "DECLARED", Scopes: []string{oplog.ScopeGlobal},
			Reduce: func(any, *model.Call) (any, error) { return nil, &model.DocumentDeleted{} },
		}},
	})
	reg, err := model.NewRegistry(spec)
	require.NoError(t, err)

	d := modeltest.New(t, reg, typ)
	d.Must(oplog.ScopeDocument, model.ActionCreateDocument, nil)
	err = d.Apply(oplog.ScopeGlobal, "CONFLICT", nil)
	require.Equal(t, model.NameReducerError, model.ErrorName(err))
	var re *model.ReducerError
	require.ErrorAs(t, err, &re)
	require.Equal(t, oplog.NameRevisionMismatch, oplog.ErrorName(re.Err))

	d = modeltest.New(t, reg, typ)
	d.Must(oplog.ScopeDocument, model.ActionCreateDocument, nil)
	err = d.Apply(oplog.ScopeGlobal, "DECLARED", nil)
	require.Equal(t, model.NameDocumentDeleted, model.ErrorName(err))
}
