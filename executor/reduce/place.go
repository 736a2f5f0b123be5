package reduce

import (
	"fmt"
	"slices"

	"github.com/doclog/doclog/executor/place"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// Placement by timestamp (executor/place, docs/sync.md): a load job's
// operations always, an ordinary job's when its model asks for it. Such a
// job needs the operations of every stream it places in (Document.Stored),
// not only the head, because a placement may supersede stored operations
// and re-derive the states after them: those within the skip threshold's
// reach of the head, with the state before them.

// placed reports whether a job's operations are placed by timestamp.
func (r *Reducer) placed(j *Job) bool {
	switch j.Kind {
	case record.KindLoad:
		return true
	case record.KindCreate, record.KindMutate, record.KindDelete:
	default:
		return false // other kinds are no placement's
	}
	m, err := r.Registry.Latest(j.DocumentType)
	return err == nil && model.PlacesByTimestamp(m)
}

// NeedsStored lists the streams of documentID whose stored operations
// reducing j needs (Document.Stored): every stream a job placed by
// timestamp writes, but the document scope of an ordinary job, whose
// system actions are applied at the head as always.
func (r *Reducer) NeedsStored(documentID string, j *record.Job) []oplog.StreamKey {
	if !r.placed(&Job{Job: j}) {
		return nil
	}
	var out []oplog.StreamKey
	add := func(scope string) {
		k := oplog.StreamKey{DocumentID: documentID, Scope: scope, Branch: j.BranchOrDefault()}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	for i := range j.Operations {
		add(j.Operations[i].Action.Scope)
	}
	for i := range j.Actions {
		if j.Actions[i].Scope != oplog.ScopeDocument {
			add(j.Actions[i].Scope)
		}
	}
	return out
}

// Scopes returns the scopes a job's operations or actions touch, in first-use
// order, so the executor loads their heads.
func Scopes(j *record.Job) []string {
	var out []string
	for i := range j.Actions {
		if !slices.Contains(out, j.Actions[i].Scope) {
			out = append(out, j.Actions[i].Scope)
		}
	}
	for i := range j.Operations {
		if !slices.Contains(out, j.Operations[i].Action.Scope) {
			out = append(out, j.Operations[i].Action.Scope)
		}
	}
	return out
}

func (r *Reducer) maxSkip() int64 {
	if r.MaxSkipThreshold > 0 {
		return r.MaxSkipThreshold
	}
	return place.DefaultMaxSkipThreshold
}

// placeGroup is one stream's share of a placed job.
type placeGroup struct {
	key oplog.StreamKey
	in  []place.Incoming
	// action is the position of a document-scope action of an ordinary
	// job, applied at the head in its turn; -1 for a group to place.
	action int
}

// place places a job's operations by timestamp: a load job's per stream,
// the document scope first; an ordinary job's document-scope actions at the
// head in their turn and each other scope's actions together where the
// scope first appears. It changes work only through copies it records in
// backups, as the action path does. For a load job it also returns what the
// placement did in each stream, which the job's result keeps.
func (r *Reducer) place(d *docRun, p *Job, work, backups map[oplog.StreamKey]*model.StreamState) ([]oplog.Operation, *oplog.LoadSummary, error) {
	branch := p.BranchOrDefault()
	docKey := oplog.StreamKey{DocumentID: d.doc.ID, Scope: oplog.ScopeDocument, Branch: branch}
	var groups []*placeGroup
	byKey := map[oplog.StreamKey]*placeGroup{}
	add := func(scope string, in place.Incoming, action int) {
		k := oplog.StreamKey{DocumentID: d.doc.ID, Scope: scope, Branch: branch}
		if action >= 0 {
			groups = append(groups, &placeGroup{key: k, in: []place.Incoming{in}, action: action})
			return
		}
		g := byKey[k]
		if g == nil {
			g = &placeGroup{key: k, action: -1}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.in = append(g.in, in)
	}
	if p.Kind == record.KindLoad {
		for _, docFirst := range []bool{true, false} {
			for i := range p.Operations {
				op := &p.Operations[i]
				if (op.Action.Scope == oplog.ScopeDocument) == docFirst {
					add(op.Action.Scope, place.Incoming{OpID: op.OpID, Index: op.Index, Skip: op.Skip, Hash: op.Hash, Action: op.Action}, -1)
				}
			}
		}
	} else {
		actions := Actions(*p)
		for i := range actions {
			in := place.Incoming{OpID: model.OpID(p.JobID, i), Index: -1, Action: actions[i]}
			if actions[i].Scope == oplog.ScopeDocument {
				add(oplog.ScopeDocument, in, i)
			} else {
				add(actions[i].Scope, in, -1)
			}
		}
	}
	var (
		ops  []oplog.Operation
		load *oplog.LoadSummary
	)
	if p.Kind == record.KindLoad {
		load = &oplog.LoadSummary{Streams: []oplog.LoadStream{}}
	}
	built := map[oplog.StreamKey][]oplog.Operation{} // this job's, so far
	for _, g := range groups {
		head := work[g.key]
		if head == nil {
			return nil, nil, &model.InvalidInput{Reason: fmt.Sprintf("scope %q was not loaded", g.key.Scope)}
		}
		if _, ok := backups[g.key]; !ok {
			backups[g.key] = head
		}
		var (
			out  []oplog.Operation
			next *model.StreamState
			plan *place.Plan
			err  error
		)
		if g.action >= 0 {
			next = head.Clone()
			var applied model.Applied
			a := g.in[0].Action
			applied, err = r.Registry.Apply(work[docKey], next, &a)
			if err == nil {
				out = []oplog.Operation{{OpID: g.in[0].OpID, Scope: g.key.Scope, Branch: branch, DocumentID: d.doc.ID,
					Index: applied.Index, Hash: applied.Hash, TimestampUtcMs: a.TimestampUtcMs, Version: applied.Version, Action: a}}
			}
		} else {
			var stored place.Stored
			loaded := d.doc.Stored[g.key] != nil
			if loaded {
				stored = *d.doc.Stored[g.key]
			}
			stored.Ops = append(append(slices.Clone(stored.Ops), d.ops[g.key]...), built[g.key]...)
			out, next, plan, err = r.placeStream(g, head, work[docKey], stored, loaded, p.Kind == record.KindLoad)
		}
		if err != nil {
			return nil, nil, err
		}
		if load != nil && plan != nil {
			load.Streams = append(load.Streams, loadStream(plan))
		}
		work[g.key] = next
		for i := range out {
			out[i].JobID = p.JobID
		}
		ops = append(ops, out...)
		built[g.key] = append(built[g.key], out...)
	}
	// The job's operations go in stream order, as the request lists them.
	var sorted []oplog.Operation
	for _, k := range d.doc.Streams {
		for i := range ops {
			if ops[i].Stream() == k {
				ops[i].DocumentType = work[docKey].DocumentType
				sorted = append(sorted, ops[i])
			}
		}
	}
	if len(sorted) != len(ops) {
		return nil, nil, &model.InvalidInput{Reason: "the job writes a stream that was not loaded"}
	}
	return sorted, load, nil
}

// loadStream counts what a load's plan does in its stream: the tail holds
// the new operations and the stored ones moved, so the new ones are what
// the tail holds beyond the moved.
func loadStream(plan *place.Plan) oplog.LoadStream {
	return oplog.LoadStream{
		Stream:     plan.Stream,
		Stored:     int64(len(plan.Tail) - plan.Moved),
		Replayed:   int64(len(plan.Replays)),
		Superseded: int64(len(plan.Superseded)),
		Reshuffled: int64(plan.Moved),
		Skip:       plan.Skip,
	}
}

// placeStream plans and derives one stream's group. stored is what the
// executor read of the stream, with the operations written since by this
// batch; loaded says the executor read it. It returns the plan too, for
// the load's summary.
func (r *Reducer) placeStream(g *placeGroup, head, doc *model.StreamState, stored place.Stored, loaded, load bool) ([]oplog.Operation, *model.StreamState, *place.Plan, error) {
	if !loaded && head.Revision > 0 {
		return nil, nil, nil, &model.InvalidInput{Reason: fmt.Sprintf("the operations of %s were not loaded", g.key)}
	}
	if stored.Revision() != head.Revision {
		return nil, nil, nil, fmt.Errorf("place in %s: operations loaded up to index %d, the head is at revision %d", g.key, stored.Revision(), head.Revision)
	}
	var (
		plan *place.Plan
		err  error
	)
	if load {
		plan, err = place.Load(g.key, stored, g.in, r.maxSkip())
	} else {
		plan, err = place.Ordinary(g.key, stored, g.in, r.maxSkip())
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if len(plan.Tail) == 0 {
		return nil, head, plan, nil
	}
	out, next, err := place.Derive(r.Registry, doc, head, stored, plan)
	return out, next, plan, err
}
