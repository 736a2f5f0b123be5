package feed

import (
	"cmp"
	"encoding/json"
	"slices"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// Kind is what a job did to a document.
type Kind string

// The kinds, in the order that picks an event's primary kind: the first of
// them the job has.
const (
	KindCreated             Kind = "created"
	KindDeleted             Kind = "deleted"
	KindRelationshipAdded   Kind = "relationship.added"
	KindRelationshipRemoved Kind = "relationship.removed"
	KindUpdated             Kind = "updated"
)

// Kinds lists every kind in priority order.
var Kinds = []Kind{KindCreated, KindDeleted, KindRelationshipAdded, KindRelationshipRemoved, KindUpdated}

// kindOf is the kind an action counts as: any action that is not one of the
// four document-scope actions with a kind of their own is an update.
func kindOf(actionType string) Kind {
	switch actionType {
	case model.ActionCreateDocument:
		return KindCreated
	case model.ActionDeleteDocument:
		return KindDeleted
	case model.ActionAddRelationship:
		return KindRelationshipAdded
	case model.ActionRemoveRelationship:
		return KindRelationshipRemoved
	}
	return KindUpdated
}

// ScopeRange is the run of indexes a job wrote to one scope of the
// document, both ends included.
type ScopeRange struct {
	Scope     string `json:"scope"`
	FromIndex int64  `json:"fromIndex"`
	ToIndex   int64  `json:"toIndex"`
}

// Event is one committed job's operations on one document.
type Event struct {
	// Position is the feed's position just after the event.
	Position     Position
	Kind         Kind
	Kinds        []Kind
	JobID        string
	DocumentID   string
	DocumentType string
	Branch       string
	// Scopes are in scope-name order.
	Scopes []ScopeRange
	// TimestampUtcMs is the latest action timestamp of the job's
	// operations.
	TimestampUtcMs int64
	// Operations are the job's rows of this document in log order. They
	// belong to the Reader's page: valid until its next Next.
	Operations []oplog.Operation
}

// HasKind reports whether the job did k.
func (e *Event) HasKind(k Kind) bool { return slices.Contains(e.Kinds, k) }

// wireEvent is an event's data line.
type wireEvent struct {
	Cursor         string            `json:"cursor"`
	Kind           Kind              `json:"kind"`
	Kinds          []Kind            `json:"kinds"`
	JobID          string            `json:"jobId"`
	DocumentID     string            `json:"documentId"`
	DocumentType   string            `json:"documentType"`
	Branch         string            `json:"branch"`
	Scopes         []ScopeRange      `json:"scopes"`
	TimestampUtcMs int64             `json:"timestampUtcMs"`
	Operations     []oplog.Operation `json:"operations,omitempty"`
}

// AppendJSON appends the event's data (the wire contract's JSON, on one
// line) to b, with the operations when withOps is set.
func (e *Event) AppendJSON(b []byte, withOps bool) ([]byte, error) {
	w := wireEvent{
		Cursor: e.Position.String(), Kind: e.Kind, Kinds: e.Kinds, JobID: e.JobID, DocumentID: e.DocumentID,
		DocumentType: e.DocumentType, Branch: e.Branch, Scopes: e.Scopes, TimestampUtcMs: e.TimestampUtcMs,
	}
	if withOps {
		w.Operations = e.Operations
	}
	out, err := json.Marshal(w)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// Assemble turns the rows of one transaction (all of them, in tail order)
// into its events, numbered from the transaction's start. Documents come in
// the order of their first row; a document's jobs in the order they were
// applied, which on every stream they share is index order. The rows of one
// job are not contiguous (a transaction inserts per stream), hence the
// grouping over the whole transaction.
func Assemble(tx uint64, rows []oplog.Operation) []Event {
	type docKey struct{ doc, branch string }
	type jobKey struct {
		docKey
		job string
	}
	var docs []docKey
	jobsOf := map[docKey][]string{}
	rowsOf := map[jobKey][]oplog.Operation{}
	for _, op := range rows {
		d := docKey{op.DocumentID, op.Branch}
		j := jobKey{d, op.JobID}
		if _, ok := jobsOf[d]; !ok {
			docs = append(docs, d)
		}
		if _, ok := rowsOf[j]; !ok {
			jobsOf[d] = append(jobsOf[d], op.JobID)
		}
		rowsOf[j] = append(rowsOf[j], op)
	}
	events := make([]Event, 0, len(rowsOf))
	for _, d := range docs {
		jobs := jobsOf[d]
		groups := make([][]oplog.Operation, len(jobs))
		for i, job := range jobs {
			groups[i] = rowsOf[jobKey{d, job}]
		}
		for _, g := range appliedOrder(groups) {
			events = append(events, summarize(g))
		}
	}
	for i := range events {
		events[i].Position = Position{Tx: tx, Done: i + 1}
	}
	return events
}

// appliedOrder orders one document's jobs as they were applied: a job
// comes after every job with a lower index on a stream both wrote. Of jobs
// free to go next (no stream in common with the ones left before them),
// the one with the earliest action timestamp goes first, then the one with
// the earliest first row: the rows alone do not say in what order such
// jobs were applied (a transaction inserts the document scope's rows
// first), and the timestamps, stamped at submission, usually do. The input
// is in first-row order.
func appliedOrder(groups [][]oplog.Operation) [][]oplog.Operation {
	if len(groups) < 2 {
		return groups
	}
	// before[i] counts the jobs that must precede job i: on each scope,
	// each job waits for the one just below it.
	type at struct {
		job int
		idx int64
	}
	byScope := map[string][]at{}
	for i, g := range groups {
		seen := map[string]bool{}
		for _, op := range g {
			if !seen[op.Scope] {
				seen[op.Scope] = true
				byScope[op.Scope] = append(byScope[op.Scope], at{i, op.Index})
			}
		}
	}
	before := make([]int, len(groups))
	next := make([][]int, len(groups))
	for _, list := range byScope {
		slices.SortFunc(list, func(a, b at) int { return cmp.Compare(a.idx, b.idx) })
		for k := 1; k < len(list); k++ {
			next[list[k-1].job] = append(next[list[k-1].job], list[k].job)
			before[list[k].job]++
		}
	}
	earliest := make([]int64, len(groups))
	for i, g := range groups {
		earliest[i] = g[0].TimestampUtcMs
		for _, op := range g {
			earliest[i] = min(earliest[i], op.TimestampUtcMs)
		}
	}
	out := make([][]oplog.Operation, 0, len(groups))
	done := make([]bool, len(groups))
	for len(out) < len(groups) {
		pick := -1
		for i := range groups {
			if !done[i] && before[i] == 0 && (pick < 0 || earliest[i] < earliest[pick]) {
				pick = i
			}
		}
		if pick < 0 {
			// A cycle cannot come from one stream's index order; should
			// the rows ever say otherwise, first-row order still delivers
			// every job once.
			for i := range groups {
				if !done[i] {
					pick = i
					break
				}
			}
		}
		done[pick] = true
		out = append(out, groups[pick])
		for _, n := range next[pick] {
			before[n]--
		}
	}
	return out
}

// summarize is the event of one job's rows of one document.
func summarize(rows []oplog.Operation) Event {
	first := rows[0]
	e := Event{JobID: first.JobID, DocumentID: first.DocumentID, DocumentType: first.DocumentType, Branch: first.Branch, Operations: rows}
	has := map[Kind]bool{}
	ranges := map[string]*ScopeRange{}
	for _, op := range rows {
		has[kindOf(op.Action.Type)] = true
		e.TimestampUtcMs = max(e.TimestampUtcMs, op.TimestampUtcMs)
		r, ok := ranges[op.Scope]
		if !ok {
			ranges[op.Scope] = &ScopeRange{Scope: op.Scope, FromIndex: op.Index, ToIndex: op.Index}
			continue
		}
		r.FromIndex, r.ToIndex = min(r.FromIndex, op.Index), max(r.ToIndex, op.Index)
	}
	for _, k := range Kinds {
		if has[k] {
			e.Kinds = append(e.Kinds, k)
		}
	}
	e.Kind = e.Kinds[0]
	for _, r := range ranges {
		e.Scopes = append(e.Scopes, *r)
	}
	slices.SortFunc(e.Scopes, func(a, b ScopeRange) int { return cmp.Compare(a.Scope, b.Scope) })
	return e
}
