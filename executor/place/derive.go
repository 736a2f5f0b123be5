package place

import (
	"fmt"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// Derive re-derives the states of a plan's tail and returns the operations
// to append (index, skip, hash, version set; job, document and type left to
// the caller) and the stream's new head. head is the stream's state at
// p.Revision, which Derive does not change; stored what the plan was made
// from; doc the document scope's state the model's reducers run under
// (ignored for the document scope itself). A plan that supersedes stored
// operations starts from the state before p.Base, replayed from the state
// before the window (or from index 0) with every stored hash checked; an
// entry with a Check must reproduce it (*HashMismatchError).
func Derive(reg *model.Registry, doc, head *model.StreamState, stored Stored, p *Plan) ([]oplog.Operation, *model.StreamState, error) {
	var st *model.StreamState
	if p.Skip == 0 {
		st = head.Clone()
	} else {
		if p.Base < stored.From {
			return nil, nil, fmt.Errorf("rebuild %s before index %d: the operations read start at index %d", p.Stream, p.Base, stored.From)
		}
		st = model.NewStreamState(p.Stream, head.DocumentType)
		if stored.From > 0 {
			st = stored.Before.Clone()
		}
		if err := reg.Replay(st, stored.Ops[:p.Base-stored.From]); err != nil {
			return nil, nil, fmt.Errorf("rebuild %s before index %d: %w", p.Stream, p.Base, err)
		}
		st.Revision = p.Revision
	}
	if p.Stream.Scope == oplog.ScopeDocument {
		doc = st
	}
	ops := make([]oplog.Operation, 0, len(p.Tail))
	for i := range p.Tail {
		e := &p.Tail[i]
		a := e.Action
		applied, err := reg.Apply(doc, st, &a)
		if err != nil {
			return nil, nil, err
		}
		if e.Check != "" && applied.Hash != e.Check {
			return nil, nil, &HashMismatchError{Stream: p.Stream, OpID: e.OpID, Index: applied.Index, Expected: e.Check, Actual: applied.Hash}
		}
		op := oplog.Operation{
			OpID: e.OpID, Scope: p.Stream.Scope, Branch: p.Stream.Branch, DocumentID: p.Stream.DocumentID,
			Index: applied.Index, Hash: applied.Hash, TimestampUtcMs: a.TimestampUtcMs, Version: applied.Version, Action: a,
		}
		if i == 0 {
			op.Skip = p.Skip
		}
		ops = append(ops, op)
	}
	return ops, st, nil
}
