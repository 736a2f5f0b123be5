package model_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/ledger"
	"github.com/doclog/doclog/model/modeltest"
)

func builtins(t testing.TB) *model.Registry {
	t.Helper()
	r, err := builtin.NewRegistry()
	require.NoError(t, err)
	return r
}

const doc = oplog.ScopeDocument

func info(t testing.TB, d *modeltest.Doc) model.DocumentInfo {
	t.Helper()
	i, ok := model.DocumentInfoOf(d.Stream(doc))
	require.True(t, ok, "document must exist")
	return i
}

func TestSystemReducer(t *testing.T) {
	t.Parallel()
	d := modeltest.New(t, builtins(t), ledger.DocumentType)
	modeltest.Run(t, d, []modeltest.Case{
		{Name: "global before create", Type: ledger.ActionOpenAccount, Input: map[string]any{"accountId": "a"},
			ErrIs: model.NameDocumentNotFound, ErrMsg: "has not been created"},
		{Name: "set name before create", Scope: doc, Type: model.ActionSetName, Input: map[string]any{"name": "x"},
			ErrIs: model.NameDocumentNotFound, ErrMsg: "has not been created"},
		{Name: "create with other type", Scope: doc, Type: model.ActionCreateDocument, Input: map[string]any{"documentType": "doclog/json"},
			ErrIs: model.NameInvalidInput, ErrMsg: `documentType "doclog/json" does not match the job's document type "doclog/ledger"`},
		{Name: "create at unknown version", Scope: doc, Type: model.ActionCreateDocument, Input: map[string]any{"version": 7},
			ErrIs: model.NameModelNotFound, ErrMsg: `"doclog/ledger" version 7 is not registered`},
		{Name: "create with bad slug", Scope: doc, Type: model.ActionCreateDocument, Input: map[string]any{"slug": "Bad Slug"},
			ErrIs: model.NameInvalidInput, ErrMsg: `slug "Bad Slug" must be lowercase`},
		{Name: "create with unknown field", Scope: doc, Type: model.ActionCreateDocument, Input: map[string]any{"colour": "red"},
			ErrIs: model.NameInvalidInput, ErrMsg: `unknown field "colour"`},
		{Name: "create with wrong type", Scope: doc, Type: model.ActionCreateDocument, Input: map[string]any{"name": 5},
			ErrIs: model.NameInvalidInput, ErrMsg: `field "name" must be a string, not number`},
		{Name: "create", Scope: doc, Type: model.ActionCreateDocument, Input: map[string]any{"name": "Books", "slug": "books"},
			Check: func(t testing.TB, d *modeltest.Doc) {
				i := info(t, d)
				require.Equal(t, model.DocumentInfo{ID: d.ID, DocumentType: ledger.DocumentType, Name: "Books", Slug: "books",
					Version: 1, CreatedAtUtcMs: d.Clock}, i)
				require.Equal(t, 1, d.Stream(doc).Version)
			}},
		{Name: "create again", Scope: doc, Type: model.ActionCreateDocument, ErrIs: model.NameDocumentExists, ErrMsg: "already exists"},
		{Name: "unknown system action", Scope: doc, Type: "FLY", ErrIs: model.NameUnknownActionType, ErrMsg: `unknown action type "FLY"`},
		{Name: "unknown model action", Type: "FLY", ErrIs: model.NameUnknownActionType, ErrMsg: `unknown action type "FLY" for doclog/ledger v1`},
		{Name: "model action in document scope", Scope: doc, Type: ledger.ActionOpenAccount, ErrIs: model.NameUnknownActionType, ErrMsg: "OPEN_ACCOUNT"},
		{Name: "model action in local scope", Scope: oplog.ScopeLocal, Type: ledger.ActionOpenAccount, Input: map[string]any{"accountId": "a"},
			ErrIs: model.NameInvalidInput, ErrMsg: `OPEN_ACCOUNT applies to scope [global], not "local"`},
		{Name: "set name", Scope: doc, Type: model.ActionSetName, Input: map[string]any{"name": "Accounts"},
			Check: func(t testing.TB, d *modeltest.Doc) { require.Equal(t, "Accounts", info(t, d).Name) }},
		{Name: "set slug", Scope: doc, Type: model.ActionSetSlug, Input: map[string]any{"slug": "accounts-2024"},
			Check: func(t testing.TB, d *modeltest.Doc) { require.Equal(t, "accounts-2024", info(t, d).Slug) }},
		{Name: "set bad slug", Scope: doc, Type: model.ActionSetSlug, Input: map[string]any{"slug": "-x"},
			ErrIs: model.NameInvalidInput, ErrMsg: "starting and ending with a letter or digit"},
		{Name: "clear slug", Scope: doc, Type: model.ActionSetSlug, Input: map[string]any{"slug": ""},
			Check: func(t testing.TB, d *modeltest.Doc) { require.Empty(t, info(t, d).Slug) }},
		{Name: "add relationship without target", Scope: doc, Type: model.ActionAddRelationship, Input: map[string]any{},
			ErrIs: model.NameInvalidInput, ErrMsg: "targetId is required"},
		{Name: "add relationship with bad metadata", Scope: doc, Type: model.ActionAddRelationship, Input: map[string]any{"targetId": "c1", "metadata": []int{1}},
			ErrIs: model.NameInvalidInput, ErrMsg: "metadata must be an object"},
		{Name: "add relationship", Scope: doc, Type: model.ActionAddRelationship, Input: map[string]any{"targetId": "c1", "metadata": map[string]any{"k": "v"}}},
		{Name: "add typed relationship", Scope: doc, Type: model.ActionAddRelationship, Input: map[string]any{"targetId": "c1", "type": "ref"},
			Check: func(t testing.TB, d *modeltest.Doc) {
				require.Equal(t, []model.Relationship{
					{Type: model.RelationshipChild, TargetID: "c1", Metadata: map[string]any{"k": "v"}},
					{Type: "ref", TargetID: "c1"},
				}, info(t, d).Relationships)
			}},
		{Name: "add relationship twice", Scope: doc, Type: model.ActionAddRelationship, Input: map[string]any{"targetId": "c1"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: "relationship-exists: relationship child to c1 already exists"},
		{Name: "add relationship to self", Scope: doc, Type: model.ActionAddRelationship, Input: map[string]any{"targetId": d.ID},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: "self-relationship"},
		{Name: "remove relationship with metadata", Scope: doc, Type: model.ActionRemoveRelationship, Input: map[string]any{"targetId": "c1", "metadata": map[string]any{}},
			ErrIs: model.NameInvalidInput, ErrMsg: "metadata is only accepted when adding"},
		{Name: "remove relationship", Scope: doc, Type: model.ActionRemoveRelationship, Input: map[string]any{"targetId": "c1"},
			Check: func(t testing.TB, d *modeltest.Doc) {
				require.Equal(t, []model.Relationship{{Type: "ref", TargetID: "c1"}}, info(t, d).Relationships)
			}},
		{Name: "remove missing relationship", Scope: doc, Type: model.ActionRemoveRelationship, Input: map[string]any{"targetId": "c1"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: "relationship-not-found: no relationship child to c1"},
		{Name: "upgrade without a path", Scope: doc, Type: model.ActionUpgradeDocument, Input: map[string]any{"toVersion": 2},
			ErrIs: model.NameMissingUpgradeTransition, ErrMsg: "no upgrade of doclog/ledger from version 1 to 2"},
		{Name: "upgrade to same version", Scope: doc, Type: model.ActionUpgradeDocument, Input: map[string]any{"toVersion": 1},
			ErrIs: model.NameInvalidInput, ErrMsg: "already at version 1"},
		{Name: "upgrade from wrong version", Scope: doc, Type: model.ActionUpgradeDocument, Input: map[string]any{"fromVersion": 3, "toVersion": 4},
			ErrIs: model.NameInvalidInput, ErrMsg: "fromVersion 3 is not the document's version 1"},
		{Name: "upgrade without target", Scope: doc, Type: model.ActionUpgradeDocument, Input: map[string]any{},
			ErrIs: model.NameInvalidInput, ErrMsg: "toVersion is required"},
		{Name: "open account", Type: ledger.ActionOpenAccount, Input: map[string]any{"accountId": "a"}},
		{Name: "delete", Scope: doc, Type: model.ActionDeleteDocument, Input: map[string]any{},
			Check: func(t testing.TB, d *modeltest.Doc) {
				i := info(t, d)
				require.True(t, i.IsDeleted)
				require.Equal(t, d.Clock, i.DeletedAtUtcMs)
			}},
		{Name: "global after delete", Type: ledger.ActionDeposit, Input: map[string]any{"accountId": "a", "amount": 1},
			ErrIs: model.NameDocumentDeleted, ErrMsg: "was deleted at"},
		{Name: "rename after delete", Scope: doc, Type: model.ActionSetName, Input: map[string]any{"name": "y"},
			ErrIs: model.NameDocumentDeleted, ErrMsg: "was deleted at"},
		{Name: "delete twice", Scope: doc, Type: model.ActionDeleteDocument, ErrIs: model.NameDocumentDeleted, ErrMsg: "was deleted at"},
	})
}

func TestApplyErrorsAreLocated(t *testing.T) {
	t.Parallel()
	d := modeltest.Created(t, builtins(t), ledger.DocumentType)
	err := d.Apply(oplog.ScopeGlobal, ledger.ActionWithdraw, map[string]any{"accountId": "nope", "amount": 5})
	var bv *model.BusinessRuleViolation
	require.ErrorAs(t, err, &bv)
	require.Equal(t, d.Stream(oplog.ScopeGlobal).Stream, bv.Stream)
	require.Equal(t, int64(0), bv.Index)
	require.Equal(t, ledger.ActionWithdraw, bv.ActionType)
	require.Equal(t, ledger.RuleAccountNotFound, bv.Rule)
	require.Equal(t, model.NameBusinessRuleViolation, model.ErrorName(err))
	require.Contains(t, err.Error(), "WITHDRAW at doc-TestApplyErrorsAreLocated/global/main index 0")
}

func TestApplyScopeMismatch(t *testing.T) {
	t.Parallel()
	r := builtins(t)
	d := modeltest.Created(t, r, ledger.DocumentType)
	a := d.Action(oplog.ScopeLocal, ledger.ActionOpenAccount, map[string]any{"accountId": "a"})
	_, err := r.Apply(d.Stream(doc), d.Stream(oplog.ScopeGlobal), &a)
	var ii *model.InvalidInput
	require.ErrorAs(t, err, &ii)
	require.Contains(t, ii.Reason, `action scope "local" does not match the stream's scope "global"`)
}

func TestApplyDocumentTypeMismatch(t *testing.T) {
	t.Parallel()
	r := builtins(t)
	d := modeltest.Created(t, r, ledger.DocumentType)
	other := model.NewStreamState(oplog.StreamKey{DocumentID: d.ID, Scope: oplog.ScopeGlobal, Branch: d.Branch}, "doclog/json")
	a := d.Action(oplog.ScopeGlobal, "MERGE_PATCH", json.RawMessage(`{}`))
	_, err := r.Apply(d.Stream(doc), other, &a)
	require.Equal(t, model.NameInvalidInput, model.ErrorName(err))
	require.Contains(t, err.Error(), "is a doclog/ledger, not a doclog/json")
}

func TestHeader(t *testing.T) {
	t.Parallel()
	d := modeltest.Created(t, builtins(t), ledger.DocumentType)
	d.Must(doc, model.ActionSetSlug, map[string]any{"slug": "s"})
	h := model.NewHeader(info(t, d), oplog.Revisions{Revision: map[string]int64{doc: 2}, LatestTimestamp: d.Clock})
	require.Equal(t, model.Header{ID: d.ID, DocumentType: ledger.DocumentType, Slug: "s", Name: "test",
		CreatedAtUtcMs: d.Clock - 1000, LastModifiedUtcMs: d.Clock, Revision: map[string]int64{doc: 2}, Version: 1}, h)
}
