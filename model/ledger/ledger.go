// Package ledger is the built-in doclog/ledger document model: accounts with
// integer balances (minor units) and transfers between them, whose reducer
// refuses an overdraft with a business-rule error. It exercises failed jobs
// end to end. See docs/models.md.
package ledger

import (
	"unicode/utf8"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// DocumentType is the type name of this model.
const DocumentType = "doclog/ledger"

// Action types (global scope).
const (
	ActionOpenAccount  = "OPEN_ACCOUNT"
	ActionDeposit      = "DEPOSIT"
	ActionWithdraw     = "WITHDRAW"
	ActionTransfer     = "TRANSFER"
	ActionCloseAccount = "CLOSE_ACCOUNT"
)

// Business rules (model.BusinessRuleViolation.Rule).
const (
	RuleAccountExists   = "account-exists"
	RuleAccountNotFound = "account-not-found"
	RuleAccountClosed   = "account-closed"
	RuleOverdraft       = "overdraft"
	RuleNonZeroBalance  = "nonzero-balance"
	RuleBalanceOverflow = "balance-overflow"
)

// MaxAmount is the largest amount and balance: integers are exact in the
// state's IEEE doubles up to 2^53-1.
const MaxAmount = 1<<53 - 1

// OpenAccountInput is the input of OPEN_ACCOUNT.
type OpenAccountInput struct {
	AccountID      string `json:"accountId"`
	Name           string `json:"name,omitempty"`
	InitialBalance int64  `json:"initialBalance,omitempty"`
}

// AmountInput is the input of DEPOSIT and WITHDRAW.
type AmountInput struct {
	AccountID string `json:"accountId"`
	Amount    int64  `json:"amount"`
}

// TransferInput is the input of TRANSFER.
type TransferInput struct {
	From   string `json:"fromAccountId"`
	To     string `json:"toAccountId"`
	Amount int64  `json:"amount"`
	Memo   string `json:"memo,omitempty"`
}

// CloseAccountInput is the input of CLOSE_ACCOUNT.
type CloseAccountInput struct {
	AccountID string `json:"accountId"`
}

func checkAmount(a int64) error {
	if a <= 0 {
		return model.Invalidf("amount must be a positive integer, not %d", a)
	}
	if a > MaxAmount {
		return model.Invalidf("amount must not exceed %d", int64(MaxAmount))
	}
	return nil
}

var global = []string{oplog.ScopeGlobal}

// Model returns version 1 of doclog/ledger.
func Model() model.Model {
	return model.MustSpec(model.Spec{
		DocumentType: DocumentType,
		ModelVersion: 1,
		Initial: map[string]func() any{
			oplog.ScopeGlobal: func() any { return map[string]any{"accounts": map[string]any{}, "transferCount": 0.0} },
			oplog.ScopeLocal:  func() any { return map[string]any{} },
		},
		ActionList: []*model.ActionSpec{
			{
				Type: ActionOpenAccount, Scopes: global,
				Description: "Opens an account with an optional initial balance.",
				Input:       `{"accountId": string, "name"?: string, "initialBalance"?: int >= 0}`,
				Decode: model.DecodeInput(func(in *OpenAccountInput) error {
					if err := model.CheckID("accountId", in.AccountID); err != nil {
						return err
					}
					if utf8.RuneCountInString(in.Name) > 512 {
						return model.Invalidf("name is longer than 512 characters")
					}
					if in.InitialBalance < 0 || in.InitialBalance > MaxAmount {
						return model.Invalidf("initialBalance must be between 0 and %d", int64(MaxAmount))
					}
					return nil
				}),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*OpenAccountInput)
					accts := accounts(state)
					if _, ok := accts[in.AccountID]; ok {
						return nil, model.Violation(RuleAccountExists, "account %q already exists", in.AccountID)
					}
					accts[in.AccountID] = map[string]any{
						"id": in.AccountID, "name": in.Name, "balance": float64(in.InitialBalance), "closed": false,
					}
					return state, nil
				},
			},
			{
				Type: ActionDeposit, Scopes: global,
				Description: "Adds an amount to an open account.",
				Input:       `{"accountId": string, "amount": int > 0}`,
				Decode:      model.DecodeInput(validateAmount),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*AmountInput)
					acct, err := open(state, in.AccountID)
					if err != nil {
						return nil, err
					}
					return state, credit(acct, in.Amount)
				},
			},
			{
				Type: ActionWithdraw, Scopes: global,
				Description: "Takes an amount from an open account; refused with overdraft if the balance would go below zero.",
				Input:       `{"accountId": string, "amount": int > 0}`,
				Decode:      model.DecodeInput(validateAmount),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*AmountInput)
					acct, err := open(state, in.AccountID)
					if err != nil {
						return nil, err
					}
					if err := debitable(acct, in.Amount); err != nil {
						return nil, err
					}
					acct["balance"] = acct["balance"].(float64) - float64(in.Amount)
					return state, nil
				},
			},
			{
				Type: ActionTransfer, Scopes: global,
				Description: "Moves an amount between two open accounts; refused with overdraft if the source would go below zero.",
				Input:       `{"fromAccountId": string, "toAccountId": string, "amount": int > 0, "memo"?: string}`,
				Decode: model.DecodeInput(func(in *TransferInput) error {
					if err := model.FirstError(model.CheckID("fromAccountId", in.From), model.CheckID("toAccountId", in.To), checkAmount(in.Amount)); err != nil {
						return err
					}
					if in.From == in.To {
						return model.Invalidf("fromAccountId and toAccountId must differ")
					}
					return nil
				}),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*TransferInput)
					from, err := open(state, in.From)
					if err != nil {
						return nil, err
					}
					to, err := open(state, in.To)
					if err != nil {
						return nil, err
					}
					if err := debitable(from, in.Amount); err != nil {
						return nil, err
					}
					if err := credit(to, in.Amount); err != nil {
						return nil, err
					}
					from["balance"] = from["balance"].(float64) - float64(in.Amount)
					m := state.(map[string]any)
					m["transferCount"] = m["transferCount"].(float64) + 1
					return state, nil
				},
			},
			{
				Type: ActionCloseAccount, Scopes: global,
				Description: "Closes an account whose balance is zero.",
				Input:       `{"accountId": string}`,
				Decode:      model.DecodeInput(func(in *CloseAccountInput) error { return model.CheckID("accountId", in.AccountID) }),
				Reduce: func(state any, call *model.Call) (any, error) {
					in := call.Input.(*CloseAccountInput)
					acct, err := open(state, in.AccountID)
					if err != nil {
						return nil, err
					}
					if b := acct["balance"].(float64); b != 0 {
						return nil, model.Violation(RuleNonZeroBalance, "account %q still holds %d", in.AccountID, int64(b))
					}
					acct["closed"] = true
					return state, nil
				},
			},
		},
	})
}

func validateAmount(in *AmountInput) error {
	return model.FirstError(model.CheckID("accountId", in.AccountID), checkAmount(in.Amount))
}

func accounts(state any) map[string]any {
	return state.(map[string]any)["accounts"].(map[string]any)
}

func open(state any, id string) (map[string]any, error) {
	a, ok := accounts(state)[id].(map[string]any)
	if !ok {
		return nil, model.Violation(RuleAccountNotFound, "account %q does not exist", id)
	}
	if closed, _ := a["closed"].(bool); closed {
		return nil, model.Violation(RuleAccountClosed, "account %q is closed", id)
	}
	return a, nil
}

func debitable(acct map[string]any, amount int64) error {
	if b := acct["balance"].(float64); b < float64(amount) {
		return model.Violation(RuleOverdraft, "account %q holds %d, cannot take %d", acct["id"], int64(b), amount)
	}
	return nil
}

// credit adds amount to a balance, refusing a balance past MaxAmount where
// doubles stop being exact.
func credit(acct map[string]any, amount int64) error {
	b := acct["balance"].(float64)
	if b+float64(amount) > MaxAmount {
		return model.Violation(RuleBalanceOverflow, "account %q would exceed %d", acct["id"], int64(MaxAmount))
	}
	acct["balance"] = b + float64(amount)
	return nil
}
