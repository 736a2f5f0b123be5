// Package balances is a projector of doclog/ledger documents: the table
// ledger_balances holds every account of every ledger document, on every
// branch, as the document's verified global state holds it. It follows
// nothing else (its Filter), keeps its schema in its own migration set,
// and can be rebuilt without downtime (projectors.Generational). Spec
// declares it for the catalog, which is all a worker binary needs
// (worker.Main(balances.Spec())).
package balances

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/ledger"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/catalog"
	"github.com/doclog/doclog/projectors/pgproj"
)

// Name is the projector's name: its checkpoints, stream heads and
// consumer group (doclog-ledger_balances) are kept under it.
const Name = "ledger_balances"

// Table is the projection's table.
const Table = "ledger_balances"

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations is the projector's migration set, applied with doclog's by
// the worker's migrate (or --migrate=auto).
func Migrations() pgmigrate.Set {
	return pgmigrate.Set{Component: "ledger-balances", FS: migrations, Dir: "migrations"}
}

// Spec declares the projector for the catalog.
func Spec() catalog.Spec {
	return catalog.Spec{
		Name:       Name,
		Summary:    "the accounts and balances of doclog/ledger documents",
		Migrations: Migrations,
		Open: func(context.Context, catalog.Options) (projectors.Projector, func(), error) {
			return Projector{}, func() {}, nil
		},
	}
}

// Projector writes ledger_balances, or a generation of it being rebuilt.
type Projector struct {
	// Generation is the generation written ("" the live table).
	Generation string
}

// Name implements projectors.Projector.
func (p Projector) Name() string { return projectors.GenerationName(Name, p.Generation) }

// Filter implements projectors.Projector: the global scope of ledger
// documents, where the accounts live, on every branch.
func (Projector) Filter() projectors.Filter {
	return projectors.Filter{DocumentTypes: []string{ledger.DocumentType}, Scopes: []string{oplog.ScopeGlobal}}
}

// FullHistory implements projectors.FullHistory: a balance is only right
// from the first operation of its ledger on.
func (Projector) FullHistory() bool { return true }

// Tables implements projectors.Generational.
func (Projector) Tables() []string { return []string{Table} }

// WithGeneration implements projectors.Generational.
func (Projector) WithGeneration(gen string) projectors.Projector { return Projector{Generation: gen} }

// state is the part of a ledger's global state the table keeps.
type state struct {
	Accounts map[string]struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Balance int64  `json:"balance"`
		Closed  bool   `json:"closed"`
	} `json:"accounts"`
}

// Apply implements projectors.Projector. Every account of a changed ledger
// is written as its verified state holds it, only over a row of a lower
// index, so a write that comes again changes nothing and the table equals
// a replay of the log whatever was applied before. The ledger model never
// removes an account (closing one marks it closed), so nothing is deleted.
// The rows go in one statement sent with the batch's commit.
func (p Projector) Apply(_ context.Context, tx projectors.Tx, changes []projectors.Change) error {
	var docs, branches, ids, names []string
	var balances, indexes []int64
	var closed []bool
	for _, ch := range changes {
		var st state
		if err := json.Unmarshal(ch.Head.State, &st); err != nil {
			return fmt.Errorf("decode the ledger state of %s at index %d: %w", ch.Stream, ch.Head.LastIndex, err)
		}
		for id, a := range st.Accounts {
			docs, branches, ids = append(docs, ch.Stream.DocumentID), append(branches, ch.Stream.Branch), append(ids, id)
			names, balances, closed = append(names, a.Name), append(balances, a.Balance), append(closed, a.Closed)
			indexes = append(indexes, ch.Head.LastIndex)
		}
	}
	if len(docs) == 0 {
		return nil
	}
	table := pgx.Identifier{projectors.GenerationName(Table, p.Generation)}.Sanitize()
	return pgproj.Queue(tx, "write the balances of "+fmt.Sprint(len(docs))+" accounts", `INSERT INTO `+table+` AS t
  (document_id, branch, account_id, name, balance, closed, last_index)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bool[], $7::bigint[])
ON CONFLICT (document_id, branch, account_id) DO UPDATE
  SET name = excluded.name, balance = excluded.balance, closed = excluded.closed, last_index = excluded.last_index
  WHERE t.last_index < excluded.last_index`, docs, branches, ids, names, balances, closed, indexes)
}
