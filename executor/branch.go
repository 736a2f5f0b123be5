package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/doclog/doclog/executor/place"
	"github.com/doclog/doclog/executor/reduce"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// Branch jobs (fork, promote, delete-branch) run as their document's only
// job in a batch (gather), so they see every earlier job of the document
// committed and hold back the later ones. Each becomes one append request
// like any job's: a fork writes the copied prefix to the new branch, a
// promote re-appends the source's operations to the target after its tip
// with a skip over what they supersede, and both are announced as ordinary
// write-ready records; the registry entry rides the same request
// (AppendRequest.Branch). A refusal (conflict, unknown branch) is the job's
// FAILED result, written under the head guard of the branch it read.

// branchRegistry is what branch jobs read of the log's registry.
type branchRegistry interface {
	Branch(ctx context.Context, documentID, branch string) (oplog.BranchRef, bool, error)
}

// statePageSize is how many operations a branch job's replays read at once.
const statePageSize = 1000

// branchPlan is what planning a branch job decided.
type branchPlan struct {
	req   *oplog.AppendRequest
	ops   []oplog.Operation
	heads map[oplog.StreamKey]*model.StreamState
	order []oplog.StreamKey
}

// splitBranchDocs takes the documents whose batch share is a branch job out
// of docs.
func splitBranchDocs(docs []*docWork) (rest, branch []*docWork) {
	for _, dw := range docs {
		if len(dw.jobs) == 1 && dw.jobs[0].job.Kind.IsBranchKind() {
			branch = append(branch, dw)
		} else {
			rest = append(rest, dw)
		}
	}
	return rest, branch
}

// reduceBranches plans each branch job and fills its document's work. A
// transient failure retries the job later; an unavailable log fails the
// batch.
func (e *Executor) reduceBranches(ctx context.Context, docs []*docWork, results map[string]oplog.JobResult, now time.Time) ([]*docWork, error) {
	var out []*docWork
	for _, dw := range docs {
		p := dw.jobs[0]
		plan, err := e.planBranchJob(ctx, p, results)
		if err != nil {
			if err := e.retryLater(ctx, []*pending{p}, fmt.Errorf("plan %s job %s: %w", p.job.Kind, p.job.JobID, err), now); err != nil {
				return nil, err
			}
			continue
		}
		if plan == nil {
			e.park(p, reduce.WaitDependency, nil, now)
			continue
		}
		p.waiting, p.waitErr = "", nil
		dw.req, dw.order, dw.heads, dw.work = plan.req, plan.order, plan.heads, plan.heads
		dw.included = []*pending{p}
		dw.built = [][]oplog.Operation{plan.ops}
		out = append(out, dw)
	}
	return out, nil
}

// planBranchJob builds a branch job's request: its operations, or its
// FAILED result. It returns nil when a queueHint dependency has no result
// yet, and an error for a failure to read the log.
func (e *Executor) planBranchJob(ctx context.Context, p *pending, results map[string]oplog.JobResult) (*branchPlan, error) {
	j := p.job
	guard := oplog.StreamKey{DocumentID: j.DocumentID, Scope: oplog.ScopeDocument, Branch: j.BranchOrDefault()}
	if j.Kind == record.KindPromote {
		guard.Branch = j.Promote.Onto
	}
	failed := func(err error) (*branchPlan, error) {
		rctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
		defer cancel()
		revs, rerr := e.cfg.Store.Revisions(rctx, j.DocumentID, guard.Branch)
		if rerr != nil {
			return nil, fmt.Errorf("read the revisions of %s: %w", guard, rerr)
		}
		rev := revs.Revision[guard.Scope]
		outcome := oplog.JobOutcome{JobID: j.JobID, Status: oplog.JobFailed,
			ErrorHistory: append(slices.Clone(p.history), reduce.ErrorInfo(err))}
		return &branchPlan{req: &oplog.AppendRequest{DocumentID: j.DocumentID, DocumentType: j.DocumentType,
			Jobs:      []oplog.JobOutcome{outcome},
			Streams:   []oplog.StreamAppend{{Stream: guard, ExpectedRevision: rev}},
			Condition: &oplog.AppendCondition{Streams: []oplog.ConditionStream{{Stream: guard, Revision: rev}}}}}, nil
	}
	if p.fail != nil {
		return failed(p.fail)
	}
	for _, h := range j.QueueHint {
		jr, ok := results[h]
		if !ok {
			return nil, nil
		}
		if jr.Status == oplog.JobFailed {
			return failed(&reduce.DependencyFailedError{Dependency: h})
		}
	}
	reg, ok := e.cfg.Store.(branchRegistry)
	if !ok {
		return failed(&reduce.BranchesUnsupportedError{})
	}
	bj := &branchJob{e: e, j: j, reg: reg}
	var plan *branchPlan
	var err error
	switch j.Kind {
	case record.KindFork:
		plan, err = bj.fork(ctx)
	case record.KindPromote:
		plan, err = bj.promote(ctx)
	default:
		plan, err = bj.deleteBranch(ctx)
	}
	// A named error is the job's verdict (a refusal, or a replay that
	// does not reproduce its hashes); an unnamed one is a failure to read
	// the log, retried.
	if err != nil && oplog.ErrorName(err) != "" && !oplog.IsUnavailable(err) {
		return failed(err)
	}
	return plan, err
}

// branchJob is one branch job being planned.
type branchJob struct {
	e   *Executor
	j   *record.Job
	reg branchRegistry
}

func (b *branchJob) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.e.cfg.StoreTimeout)
}

// live reads a branch's entry and revisions, refusing a deleted branch or
// (when mustExist) one without operations.
func (b *branchJob) live(ctx context.Context, branch string, mustExist bool) (oplog.BranchRef, bool, map[string]int64, error) {
	c, cancel := b.ctx(ctx)
	defer cancel()
	ref, has, err := b.reg.Branch(c, b.j.DocumentID, branch)
	if err != nil {
		return ref, false, nil, fmt.Errorf("read branch %s: %w", branch, err)
	}
	revs, err := b.e.cfg.Store.Revisions(c, b.j.DocumentID, branch)
	if err != nil {
		return ref, false, nil, fmt.Errorf("read the revisions of branch %s: %w", branch, err)
	}
	if has && ref.Deleted {
		return ref, has, nil, &reduce.BranchNotFoundError{DocumentID: b.j.DocumentID, Branch: branch, Deleted: true}
	}
	if mustExist && revs.Revision[oplog.ScopeDocument] == 0 {
		return ref, has, nil, &reduce.BranchNotFoundError{DocumentID: b.j.DocumentID, Branch: branch}
	}
	return ref, has, revs.Revision, nil
}

// documentType is the stored type of the branch's document, refusing a job
// of another type.
func (b *branchJob) documentType(ctx context.Context, branch string) (string, error) {
	c, cancel := b.ctx(ctx)
	defer cancel()
	k := oplog.StreamKey{DocumentID: b.j.DocumentID, Scope: oplog.ScopeDocument, Branch: branch}
	first, err := b.e.cfg.Store.ReadStream(c, k, 0, 1)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", k, err)
	}
	if len(first) == 0 {
		return b.j.DocumentType, nil
	}
	if t := first[0].DocumentType; t != b.j.DocumentType {
		return "", &reduce.DocumentTypeMismatchError{DocumentID: b.j.DocumentID, JobType: b.j.DocumentType, StoredType: t}
	}
	return b.j.DocumentType, nil
}

// stateAt rebuilds a stream's state after its first upTo operations.
func (b *branchJob) stateAt(ctx context.Context, k oplog.StreamKey, docType string, upTo int64) (*model.StreamState, error) {
	c, cancel := b.ctx(ctx)
	defer cancel()
	rb, err := b.e.cfg.Registry.StateAt(c, b.e.cfg.Store, k, docType, upTo, statePageSize)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s at revision %d: %w", k, upTo, err)
	}
	if rb.State.Revision != upTo {
		return nil, fmt.Errorf("rebuild %s at revision %d: the stream has only %d operations", k, upTo, rb.State.Revision)
	}
	return rb.State, nil
}

func (b *branchJob) read(ctx context.Context, k oplog.StreamKey, from, to int64) ([]oplog.Operation, error) {
	c, cancel := b.ctx(ctx)
	defer cancel()
	ops, err := b.e.cfg.Store.ReadStream(c, k, from, int(to-from))
	if err != nil {
		return nil, fmt.Errorf("read %s %d..%d: %w", k, from, to-1, err)
	}
	if int64(len(ops)) != to-from {
		return nil, fmt.Errorf("read %s %d..%d: %d operations", k, from, to-1, len(ops))
	}
	return ops, nil
}

// scopes lists the scopes of the maps, the document scope first, then in
// code-point order: the order a request writes them.
func scopes(ms ...map[string]int64) []string {
	set := map[string]bool{}
	for _, m := range ms {
		for s := range maps.Keys(m) {
			set[s] = true
		}
	}
	out := slices.Sorted(maps.Keys(set))
	if i := slices.Index(out, oplog.ScopeDocument); i > 0 {
		out = append([]string{oplog.ScopeDocument}, slices.Delete(out, i, i+1)...)
	}
	return out
}

// fork copies the source's first At operations of every scope to the new
// branch: the rows as stored (index, skip, hash, action), under operation
// ids of the fork job, with a keyframe of each scope's state at the fork
// point so the new branch never replays its prefix from index 0.
func (b *branchJob) fork(ctx context.Context) (*branchPlan, error) {
	j := b.j
	src, dst := j.BranchOrDefault(), j.Fork.Branch
	_, _, tips, err := b.live(ctx, src, true)
	if err != nil {
		return nil, err
	}
	ref, has, dstTips, err := b.live(ctx, dst, false)
	if err != nil && !errors.As(err, new(*reduce.BranchNotFoundError)) {
		return nil, err
	}
	if has || len(dstTips) > 0 {
		return nil, &reduce.BranchExistsError{DocumentID: j.DocumentID, Branch: dst, Deleted: ref.Deleted}
	}
	docType, err := b.documentType(ctx, src)
	if err != nil {
		return nil, err
	}
	at := map[string]int64{}
	for _, s := range scopes(tips, j.Fork.At) {
		n, given := j.Fork.At[s]
		if !given {
			n = tips[s]
		}
		if n > tips[s] {
			return nil, &reduce.InvalidForkPointError{DocumentID: j.DocumentID, Branch: src, Scope: s, At: n, Tip: tips[s], Reason: "past the tip"}
		}
		if n > 0 {
			at[s] = n
		}
	}
	if at[oplog.ScopeDocument] == 0 {
		return nil, &reduce.InvalidForkPointError{DocumentID: j.DocumentID, Branch: src, Scope: oplog.ScopeDocument, Tip: tips[oplog.ScopeDocument],
			Reason: "a fork starts after the document's creation"}
	}
	plan := &branchPlan{heads: map[oplog.StreamKey]*model.StreamState{}}
	req := &oplog.AppendRequest{DocumentID: j.DocumentID, DocumentType: docType,
		Jobs: []oplog.JobOutcome{{JobID: j.JobID, Status: oplog.JobWriteReady}}}
	n := 0
	for _, s := range scopes(at) {
		from := oplog.StreamKey{DocumentID: j.DocumentID, Scope: s, Branch: src}
		to := oplog.StreamKey{DocumentID: j.DocumentID, Scope: s, Branch: dst}
		ops, err := b.read(ctx, from, 0, at[s])
		if err != nil {
			return nil, err
		}
		for i := range ops {
			op := &ops[i]
			op.OpID, op.JobID, op.Branch = model.OpID(j.JobID, n), j.JobID, dst
			op.Ordinal, op.TxID, op.WrittenAt = 0, 0, time.Time{}
			n++
		}
		head, err := b.stateAt(ctx, from, docType, at[s])
		if err != nil {
			return nil, err
		}
		head.Stream = to
		kf, err := head.Keyframe()
		if err != nil {
			return nil, fmt.Errorf("keyframe of %s at the fork point: %w", to, err)
		}
		req.Streams = append(req.Streams, oplog.StreamAppend{Stream: to, ExpectedRevision: 0, Operations: ops})
		req.Keyframes = append(req.Keyframes, kf)
		plan.ops = append(plan.ops, ops...)
		plan.heads[to] = head
		plan.order = append(plan.order, to)
	}
	guard := oplog.StreamKey{DocumentID: j.DocumentID, Scope: oplog.ScopeDocument, Branch: dst}
	req.Condition = &oplog.AppendCondition{Streams: []oplog.ConditionStream{{Stream: guard, Revision: 0}}}
	req.Branch = &oplog.BranchRef{DocumentID: j.DocumentID, Branch: dst, Base: src, ForkPoint: at,
		BasePoint: maps.Clone(at), OwnPoint: maps.Clone(at), JobID: j.JobID}
	plan.req = req
	return plan, nil
}

// promote makes the target equal the source, scope by scope: the source
// wins, as a promote picks a winner and does not merge. From the last
// point where they held the same state (the fork point, or the tips the
// last promote between them made equal), the source's operations after it
// are re-appended to the target after its tip, the first with a skip over
// the target's own operations since that point; where there is no such
// point, the source's effective operations supersede the whole of the
// target's scope (promoted). They are replayed on the target's state
// before them, so every state is re-derived and its hash checked against
// the source's. A target that did not move is fast-forwarded; a scope the
// source has no operation of is left as the target has it.
func (b *branchJob) promote(ctx context.Context) (*branchPlan, error) {
	j := b.j
	src, dst := j.BranchOrDefault(), j.Promote.Onto
	if src == dst {
		return nil, &reduce.InvalidPromoteError{DocumentID: j.DocumentID, Branch: src, Onto: dst, Reason: "a branch is not promoted onto itself"}
	}
	srcRef, _, srcTips, err := b.live(ctx, src, true)
	if err != nil {
		return nil, err
	}
	dstRef, _, dstTips, err := b.live(ctx, dst, true)
	if err != nil {
		return nil, err
	}
	if !maps.Equal(nonZero(j.Promote.ExpectedTip), nonZero(dstTips)) {
		return nil, &reduce.BranchConflictError{DocumentID: j.DocumentID, Branch: dst, Expected: nonZero(j.Promote.ExpectedTip), Actual: nonZero(dstTips)}
	}
	docType, err := b.documentType(ctx, src)
	if err != nil {
		return nil, err
	}
	if _, err := b.documentType(ctx, dst); err != nil {
		return nil, err
	}
	// own and base: where the source and the target last held the same
	// state, per scope; the entry that says so is the one updated.
	// Branches with no fork between them have no such point: every
	// scope is then promoted whole, and no entry changes.
	var own, base map[string]int64
	var entry oplog.BranchRef
	related := true
	switch {
	case srcRef.Base == dst:
		own, base, entry = srcRef.OwnPoint, srcRef.BasePoint, srcRef
	case dstRef.Base == src:
		own, base, entry = dstRef.BasePoint, dstRef.OwnPoint, dstRef
	default:
		related = false
	}
	entry.DocumentID, entry.JobID = j.DocumentID, j.JobID
	if entry.Branch == "" {
		entry.Branch = src
	}
	newOwn, newBase := maps.Clone(own), maps.Clone(base)
	plan := &branchPlan{heads: map[oplog.StreamKey]*model.StreamState{}}
	req := &oplog.AppendRequest{DocumentID: j.DocumentID, DocumentType: docType,
		Jobs: []oplog.JobOutcome{{JobID: j.JobID, Status: oplog.JobWriteReady}}}
	n := 0
	for _, s := range scopes(srcTips, dstTips) {
		S, T, o, bp := srcTips[s], dstTips[s], own[s], base[s]
		if o > S || bp > T {
			o, bp = 0, 0
		}
		if S == o && T == bp {
			continue // already equal
		}
		if S == 0 {
			// The source has no operation of this scope, and no
			// operation empties a stream: the target keeps its own, and
			// the scope's sync points stay where they were.
			continue
		}
		fromKey := oplog.StreamKey{DocumentID: j.DocumentID, Scope: s, Branch: src}
		to := oplog.StreamKey{DocumentID: j.DocumentID, Scope: s, Branch: dst}
		ops, skip, err := b.promoted(ctx, fromKey, to, S, T, o, bp)
		if err != nil {
			return nil, err
		}
		for i := range ops {
			op := &ops[i]
			op.Index = T + int64(i)
			op.OpID, op.JobID, op.Branch = model.OpID(j.JobID, n), j.JobID, dst
			op.Ordinal, op.TxID, op.WrittenAt = 0, 0, time.Time{}
			n++
		}
		// The target's state before the first of them, as a replay of the
		// target will see it: after its first T-skip operations, at index
		// T (empty when the skip supersedes the whole scope).
		head, err := b.stateAt(ctx, to, docType, T-skip)
		if err != nil {
			return nil, err
		}
		head.Revision = T
		if err := b.e.cfg.Registry.Replay(head, ops); err != nil {
			return nil, fmt.Errorf("re-derive %s from index %d: %w", to, T, err)
		}
		ops[0].Skip = skip
		req.Streams = append(req.Streams, oplog.StreamAppend{Stream: to, ExpectedRevision: T, Operations: ops})
		if model.KeyframeDue(T, head.Revision, b.e.cfg.KeyframeInterval, head.Size) {
			if kf, err := head.Keyframe(); err == nil {
				req.Keyframes = append(req.Keyframes, kf)
			}
		}
		plan.ops = append(plan.ops, ops...)
		plan.heads[to] = head
		plan.order = append(plan.order, to)
		if newOwn == nil {
			newOwn, newBase = map[string]int64{}, map[string]int64{}
		}
		newOwn[s], newBase[s] = S, head.Revision
	}
	guard := oplog.StreamKey{DocumentID: j.DocumentID, Scope: oplog.ScopeDocument, Branch: dst}
	req.Condition = &oplog.AppendCondition{Streams: []oplog.ConditionStream{{Stream: guard, Revision: dstTips[oplog.ScopeDocument]}}}
	if !slices.ContainsFunc(req.Streams, func(sa oplog.StreamAppend) bool { return sa.Stream == guard }) {
		req.Streams = append([]oplog.StreamAppend{{Stream: guard, ExpectedRevision: dstTips[oplog.ScopeDocument]}}, req.Streams...)
	}
	if entry.Branch == src {
		entry.OwnPoint, entry.BasePoint = newOwn, newBase
	} else {
		entry.OwnPoint, entry.BasePoint = newBase, newOwn
	}
	if related {
		req.Branch = &entry
	}
	plan.req = req
	return plan, nil
}

// promoted returns the source's operations a promote re-appends to the
// target of one scope, as the source stores them (their skips within the
// list still to apply), and the skip of the first: from the sync points
// (own o on the source at tip S, base bp on the target at tip T) when they
// give a sound start, else every operation a replay of the source keeps,
// the first superseding the whole of the target's scope (skip T).
//
// From the sync points: the source's operations after o with skip T-bp,
// which supersedes the target's own since bp (0 when the target did not
// move: a fast-forward); or, when only the target moved, the source's last
// shared operation again, with skip T-bp+1. Neither holds when a source
// operation's own skip reaches into the shared prefix, when the last
// shared operation is the scope's first (a skip reaching the target's
// first operation supersedes the whole scope anyway), when the branches
// have no sync point (no fork between them), or when one of the target's
// operations since T-skip has a skip reaching before T-skip: a replay keeps
// superseded what a skip superseded, so it would not see the target's
// first T-skip operations before the re-appended ones, and their hashes
// would not replay (a fork at an index inside what a later promote
// superseded, promoted back). Then the whole scope.
func (b *branchJob) promoted(ctx context.Context, k, target oplog.StreamKey, S, T, o, bp int64) ([]oplog.Operation, int64, error) {
	from, skip := o, T-bp
	if S == o {
		from, skip = o-1, T-bp+1
	}
	if bp > 0 && from >= 1 {
		ops, err := b.read(ctx, k, from, S)
		if err != nil {
			return nil, 0, err
		}
		since, err := b.read(ctx, target, T-skip, T)
		if err != nil {
			return nil, 0, err
		}
		intoShared := func(op oplog.Operation) bool { return op.Index-op.Skip < from || (op.Index == from && op.Skip > 0) }
		behindStart := func(op oplog.Operation) bool { return op.Index-op.Skip < T-skip }
		if !slices.ContainsFunc(ops, intoShared) && !slices.ContainsFunc(since, behindStart) {
			return ops, skip, nil
		}
	}
	all, err := b.read(ctx, k, 0, S)
	if err != nil {
		return nil, 0, err
	}
	eff := place.Effective(all)
	ops := make([]oplog.Operation, len(eff))
	for i, e := range eff {
		ops[i] = all[e]
		ops[i].Skip = 0
	}
	return ops, T, nil
}

// deleteBranch marks the branch deleted in the registry, under the head
// guard of its document scope; its operations stay in the log.
func (b *branchJob) deleteBranch(ctx context.Context) (*branchPlan, error) {
	j := b.j
	ref, _, tips, err := b.live(ctx, j.BranchOrDefault(), true)
	if err != nil {
		return nil, err
	}
	if _, err := b.documentType(ctx, j.BranchOrDefault()); err != nil {
		return nil, err
	}
	guard := oplog.StreamKey{DocumentID: j.DocumentID, Scope: oplog.ScopeDocument, Branch: j.BranchOrDefault()}
	ref.DocumentID, ref.Branch, ref.Deleted, ref.JobID = j.DocumentID, guard.Branch, true, j.JobID
	rev := tips[oplog.ScopeDocument]
	return &branchPlan{req: &oplog.AppendRequest{DocumentID: j.DocumentID, DocumentType: j.DocumentType,
		Jobs:      []oplog.JobOutcome{{JobID: j.JobID, Status: oplog.JobWriteReady}},
		Streams:   []oplog.StreamAppend{{Stream: guard, ExpectedRevision: rev}},
		Condition: &oplog.AppendCondition{Streams: []oplog.ConditionStream{{Stream: guard, Revision: rev}}},
		Branch:    &ref}}, nil
}

// nonZero drops the scopes at revision 0: an absent scope and an empty one
// are the same tip.
func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for s, v := range m {
		if v != 0 {
			out[s] = v
		}
	}
	return out
}

// refuseDeletedBranches fails the ordinary jobs that write a deleted
// branch: reads of it answer not found, so a write to it would be lost to
// every reader; its name is not reused either. main is never deleted, so
// only the other branches cost a registry read. A failed read retries the
// document's jobs later.
func (e *Executor) refuseDeletedBranches(ctx context.Context, docs []*docWork, now time.Time) error {
	reg, ok := e.cfg.Store.(branchRegistry)
	if !ok {
		return nil
	}
	type key struct{ doc, branch string }
	deleted := map[key]bool{}
	for _, dw := range docs {
		for _, p := range dw.jobs {
			k := key{dw.id, p.job.BranchOrDefault()}
			if p.fail != nil || k.branch == oplog.DefaultBranch {
				continue
			}
			gone, seen := deleted[k]
			if !seen {
				c, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
				ref, has, err := reg.Branch(c, k.doc, k.branch)
				cancel()
				if err != nil {
					dw.failed = true
					if err := e.retryLater(ctx, dw.jobs, fmt.Errorf("read branch %s of %s: %w", k.branch, k.doc, err), now); err != nil {
						return err
					}
					break
				}
				gone = has && ref.Deleted
				deleted[k] = gone
			}
			if gone {
				p.fail = &reduce.BranchNotFoundError{DocumentID: k.doc, Branch: k.branch, Deleted: true}
			}
		}
	}
	return nil
}
