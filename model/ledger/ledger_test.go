package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/ledger"
	"github.com/doclog/doclog/model/modeltest"
)

func balances(want map[string]float64) func(testing.TB, *modeltest.Doc) {
	return func(t testing.TB, d *modeltest.Doc) {
		got := map[string]float64{}
		for id, a := range d.State(oplog.ScopeGlobal).(map[string]any)["accounts"].(map[string]any) {
			got[id] = a.(map[string]any)["balance"].(float64)
		}
		require.Equal(t, want, got)
	}
}

func TestLedgerActions(t *testing.T) {
	t.Parallel()
	r, err := model.NewRegistry(ledger.Model())
	require.NoError(t, err)
	d := modeltest.Created(t, r, ledger.DocumentType)
	modeltest.Run(t, d, []modeltest.Case{
		{Name: "open", Type: ledger.ActionOpenAccount, Input: map[string]any{"accountId": "alice", "name": "Alice", "initialBalance": 100}},
		{Name: "open second", Type: ledger.ActionOpenAccount, Input: map[string]any{"accountId": "bob"},
			Check: balances(map[string]float64{"alice": 100, "bob": 0})},
		{Name: "open twice", Type: ledger.ActionOpenAccount, Input: map[string]any{"accountId": "bob"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `account-exists: account "bob" already exists`},
		{Name: "open negative", Type: ledger.ActionOpenAccount, Input: map[string]any{"accountId": "carol", "initialBalance": -1},
			ErrIs: model.NameInvalidInput, ErrMsg: "initialBalance must be between 0 and 9007199254740991"},
		{Name: "open without id", Type: ledger.ActionOpenAccount, Input: map[string]any{},
			ErrIs: model.NameInvalidInput, ErrMsg: "accountId is required"},
		{Name: "deposit", Type: ledger.ActionDeposit, Input: map[string]any{"accountId": "bob", "amount": 5},
			Check: balances(map[string]float64{"alice": 100, "bob": 5})},
		{Name: "deposit zero", Type: ledger.ActionDeposit, Input: map[string]any{"accountId": "bob", "amount": 0},
			ErrIs: model.NameInvalidInput, ErrMsg: "amount must be a positive integer, not 0"},
		{Name: "deposit fraction", Type: ledger.ActionDeposit, Input: map[string]any{"accountId": "bob", "amount": 1.5},
			ErrIs: model.NameInvalidInput, ErrMsg: `field "amount" must be an integer, not number 1.5`},
		{Name: "deposit unknown", Type: ledger.ActionDeposit, Input: map[string]any{"accountId": "zed", "amount": 1},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `account-not-found: account "zed" does not exist`},
		{Name: "deposit overflow", Type: ledger.ActionDeposit, Input: map[string]any{"accountId": "alice", "amount": ledger.MaxAmount},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: "balance-overflow"},
		{Name: "withdraw", Type: ledger.ActionWithdraw, Input: map[string]any{"accountId": "alice", "amount": 30},
			Check: balances(map[string]float64{"alice": 70, "bob": 5})},
		{Name: "overdraft", Type: ledger.ActionWithdraw, Input: map[string]any{"accountId": "bob", "amount": 6},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `overdraft: account "bob" holds 5, cannot take 6`},
		{Name: "transfer", Type: ledger.ActionTransfer, Input: map[string]any{"fromAccountId": "alice", "toAccountId": "bob", "amount": 70, "memo": "rent"},
			Check: func(t testing.TB, d *modeltest.Doc) {
				balances(map[string]float64{"alice": 0, "bob": 75})(t, d)
				require.Equal(t, 1.0, d.State(oplog.ScopeGlobal).(map[string]any)["transferCount"])
			}},
		{Name: "transfer overdraft", Type: ledger.ActionTransfer, Input: map[string]any{"fromAccountId": "alice", "toAccountId": "bob", "amount": 1},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `overdraft: account "alice" holds 0, cannot take 1`},
		{Name: "transfer to self", Type: ledger.ActionTransfer, Input: map[string]any{"fromAccountId": "bob", "toAccountId": "bob", "amount": 1},
			ErrIs: model.NameInvalidInput, ErrMsg: "fromAccountId and toAccountId must differ"},
		{Name: "transfer to unknown", Type: ledger.ActionTransfer, Input: map[string]any{"fromAccountId": "bob", "toAccountId": "zed", "amount": 1},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: "account-not-found"},
		{Name: "close with balance", Type: ledger.ActionCloseAccount, Input: map[string]any{"accountId": "bob"},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `nonzero-balance: account "bob" still holds 75`},
		{Name: "close", Type: ledger.ActionCloseAccount, Input: map[string]any{"accountId": "alice"}},
		{Name: "deposit to closed", Type: ledger.ActionDeposit, Input: map[string]any{"accountId": "alice", "amount": 1},
			ErrIs: model.NameBusinessRuleViolation, ErrMsg: `account-closed: account "alice" is closed`},
	})
}
