package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// Filter selects events. The values of one field are OR-ed, the fields
// AND-ed; an empty field selects everything.
type Filter struct {
	DocumentTypes []string
	DocumentIDs   []string
	// Parents keeps the events of the documents one of these documents
	// links to with a "child" relationship on the event's branch, as the
	// log stands just before the event (see Matcher).
	Parents  []string
	Branches []string
	// Kinds keeps an event when any of its kinds is one of these.
	Kinds []Kind
}

// link is one "child" relationship of a parent on a branch.
type link struct{ parent, branch, child string }

// Matcher applies a Filter along the feed. The parent filter is resolved
// from the log itself, not from the relationship index: Init replays the
// parents' document scopes up to the subscription's start, and Observe
// follows their ADD_RELATIONSHIP and REMOVE_RELATIONSHIP events from there.
// So an event matches by the links of the log at its own place in the feed,
// and a subscriber that resumes gets exactly the events one that never
// disconnected would have got, whatever the index has applied meanwhile.
type Matcher struct {
	f     Filter
	links map[link]struct{}
}

// NewMatcher returns a matcher of f; with parents, call Init before the
// first event.
func NewMatcher(f Filter) *Matcher {
	return &Matcher{f: f, links: map[link]struct{}{}}
}

// ParentLog is the part of the log Init reads.
type ParentLog interface {
	Heads(ctx context.Context, documentIDs []string) (map[oplog.StreamKey]int64, error)
	ReadStream(ctx context.Context, stream oplog.StreamKey, fromIndex int64, limit int) ([]oplog.Operation, error)
}

// initPage bounds one read of a parent's document scope.
const initPage = 500

// Init replays the links of every parent's document scope (on each branch)
// from the rows of the transactions before tx: the links as the log stands
// at the start of transaction tx, whose events the feed then observes.
func (m *Matcher) Init(ctx context.Context, log ParentLog, tx uint64) error {
	if len(m.f.Parents) == 0 {
		return nil
	}
	// A value the log's ids cannot hold names no parent, and the database
	// refuses some of them (a NUL byte) outright.
	var ids []string
	for _, p := range m.f.Parents {
		if oplog.CheckText(p) == nil {
			ids = append(ids, p)
		}
	}
	heads, err := log.Heads(ctx, ids)
	if err != nil {
		return fmt.Errorf("reading the streams of the parents: %w", err)
	}
streams:
	for k := range heads {
		if k.Scope != oplog.ScopeDocument {
			continue
		}
		for from := int64(0); ; {
			ops, err := log.ReadStream(ctx, k, from, initPage)
			if err != nil {
				return fmt.Errorf("reading the links of parent %s: %w", k, err)
			}
			for _, op := range ops {
				// A stream's index order is the tail's order, so the
				// rows from tx on all come after the start.
				if op.TxID >= tx {
					continue streams
				}
				m.apply(op)
			}
			if len(ops) < initPage {
				break
			}
			from = ops[len(ops)-1].Index + 1
		}
	}
	return nil
}

// apply follows one row of a parent's document scope.
func (m *Matcher) apply(op oplog.Operation) {
	add := op.Action.Type == model.ActionAddRelationship
	if !add && op.Action.Type != model.ActionRemoveRelationship {
		return
	}
	var in struct {
		TargetID string `json:"targetId"`
		Type     string `json:"type"`
	}
	// The log holds only actions its model accepted, so an input that does
	// not decode is not a link.
	if json.Unmarshal(op.Action.Input, &in) != nil {
		return
	}
	if in.Type == "" {
		in.Type = model.RelationshipChild
	}
	if in.Type != model.RelationshipChild {
		return
	}
	l := link{parent: op.DocumentID, branch: op.Branch, child: in.TargetID}
	if add {
		m.links[l] = struct{}{}
	} else {
		delete(m.links, l)
	}
}

// Observe follows the event's links when its document is one of the
// parents. Call it for every event of the feed in order, the ones already
// behind a resumed position too, after Match.
func (m *Matcher) Observe(e *Event) {
	if !slices.Contains(m.f.Parents, e.DocumentID) {
		return
	}
	for _, op := range e.Operations {
		if op.Scope == oplog.ScopeDocument {
			m.apply(op)
		}
	}
}

// Match reports whether the filter selects the event.
func (m *Matcher) Match(e *Event) bool {
	f := m.f
	switch {
	case len(f.DocumentTypes) > 0 && !slices.Contains(f.DocumentTypes, e.DocumentType),
		len(f.DocumentIDs) > 0 && !slices.Contains(f.DocumentIDs, e.DocumentID),
		len(f.Branches) > 0 && !slices.Contains(f.Branches, e.Branch),
		len(f.Kinds) > 0 && !slices.ContainsFunc(f.Kinds, e.HasKind):
		return false
	}
	if len(f.Parents) == 0 {
		return true
	}
	for _, p := range f.Parents {
		if _, ok := m.links[link{parent: p, branch: e.Branch, child: e.DocumentID}]; ok {
			return true
		}
	}
	return false
}
