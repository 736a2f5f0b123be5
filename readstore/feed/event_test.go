package feed_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/readstore/feed"
)

// row is an operation of a transaction's rows, in the order given.
func row(doc, job, scope string, idx, ts int64, action string) oplog.Operation {
	return oplog.Operation{DocumentID: doc, JobID: job, Scope: scope, Branch: oplog.DefaultBranch, Index: idx,
		TimestampUtcMs: ts, DocumentType: "doclog/json", Action: oplog.Action{Type: action}}
}

func jobs(events []feed.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.DocumentID + "/" + e.JobID
	}
	return out
}

// The rows as a transaction inserts them (per stream, the document scope
// first): events per job per document, documents by first row, jobs by
// index on shared scopes and by timestamp otherwise, numbered in order.
func TestAssembleOrdersByIndexThenTimestamp(t *testing.T) {
	rows := []oplog.Operation{
		row("d", "j2", oplog.ScopeDocument, 0, 20, model.ActionDeleteDocument),
		row("e", "k1", oplog.ScopeGlobal, 0, 5, "SET"),
		row("d", "j1", oplog.ScopeGlobal, 4, 10, "SET"),
		row("d", "j3", oplog.ScopeGlobal, 5, 5, "SET"), // an earlier stamp, but after j1 on global
		row("d", "j3", oplog.ScopeLocal, 0, 6, "SET"),
	}
	events := feed.Assemble(42, rows)
	require.Equal(t, []string{"d/j1", "d/j3", "d/j2", "e/k1"}, jobs(events))
	for i, e := range events {
		require.Equal(t, feed.Position{Tx: 42, Done: i + 1}, e.Position)
	}
	require.Equal(t, []feed.ScopeRange{{Scope: "global", FromIndex: 5, ToIndex: 5}, {Scope: "local", FromIndex: 0, ToIndex: 0}}, events[1].Scopes)
	require.Equal(t, int64(6), events[1].TimestampUtcMs)
	require.Equal(t, feed.KindDeleted, events[2].Kind)
	require.Len(t, events[1].Operations, 2)
}

func TestAssembleKinds(t *testing.T) {
	rows := []oplog.Operation{
		row("d", "j", oplog.ScopeDocument, 0, 1, model.ActionCreateDocument),
		row("d", "j", oplog.ScopeDocument, 1, 1, model.ActionRemoveRelationship),
		row("d", "j", oplog.ScopeDocument, 2, 1, model.ActionAddRelationship),
		row("d", "j", oplog.ScopeDocument, 3, 1, model.ActionSetName),
	}
	e := feed.Assemble(1, rows)[0]
	require.Equal(t, feed.KindCreated, e.Kind)
	require.Equal(t, []feed.Kind{feed.KindCreated, feed.KindRelationshipAdded, feed.KindRelationshipRemoved, feed.KindUpdated}, e.Kinds)
	for _, k := range e.Kinds {
		require.True(t, e.HasKind(k))
	}
	require.False(t, e.HasKind(feed.KindDeleted))
}

// Rows that contradict each other's index order (no real transaction
// holds them) still give every job one event.
func TestAssembleSurvivesACycle(t *testing.T) {
	rows := []oplog.Operation{
		row("d", "a", oplog.ScopeGlobal, 1, 1, "SET"),
		row("d", "b", oplog.ScopeGlobal, 0, 1, "SET"),
		row("d", "a", oplog.ScopeLocal, 0, 1, "SET"),
		row("d", "b", oplog.ScopeLocal, 1, 1, "SET"),
	}
	require.ElementsMatch(t, []string{"d/a", "d/b"}, jobs(feed.Assemble(1, rows)))
}
