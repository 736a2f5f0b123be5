package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// What a parked job waits for.
const (
	waitDependency = "dependency"
	waitModel      = "model"
)

// maxHistory bounds the error history kept per job: the first errors and
// the last say what happened; hundreds of identical retries do not.
const maxHistory = 16

// docWork is one document's share of a batch: its ready jobs, the heads of
// the streams they touch, and what reducing them produced.
type docWork struct {
	id   string
	part int32
	jobs []*pending // ready jobs, in partition order

	order  []oplog.StreamKey // streams loaded, in first-use order
	before map[oplog.StreamKey]int64
	work   map[oplog.StreamKey]*model.StreamState
	ops    map[oplog.StreamKey][]oplog.Operation

	included []*pending // jobs settled by the request, in order
	outcomes []oplog.JobOutcome
	wrote    map[string]bool  // jobs written as WRITE_READY in this request
	failed   map[string]error // jobs written as FAILED in this request
}

func (dw *docWork) addStream(k oplog.StreamKey) bool {
	if _, ok := dw.before[k]; ok || slices.Contains(dw.order, k) {
		return false
	}
	dw.order = append(dw.order, k)
	return true
}

// step runs one batch: announce what is settled, then look up, load, reduce,
// append and announce the jobs that are ready. It returns an error for the
// batch as a whole: an unavailable dependency, or the hook's crash.
func (e *Executor) step(ctx context.Context, now time.Time) error {
	if err := e.flush(ctx); err != nil {
		return err
	}
	if err := e.refreshPauses(ctx, now); err != nil {
		return err
	}
	batch := e.gather(now)
	if len(batch) == 0 {
		return nil
	}

	e.m.batchJobs.Observe(float64(len(batch)))
	start := time.Now()
	results, err := e.lookup(ctx, batch)
	e.m.since("lookup", start)
	if err != nil {
		return e.retryLater(ctx, batch, fmt.Errorf("look up job results: %w", err), now)
	}
	var fresh, bare []*pending
	for _, p := range batch {
		jr, ok := results[p.job.JobID]
		if !ok {
			if p.bare {
				bare = append(bare, p)
			} else {
				fresh = append(fresh, p)
			}
			continue
		}
		// Applied before (a crash or a rebalance came between the append
		// and the offset commit): announce it again, never reduce it again.
		if err := e.reannounce(ctx, p, jr, now); err != nil {
			if err := e.retryLater(ctx, []*pending{p}, fmt.Errorf("re-announce job %s: %w", p.job.JobID, err), now); err != nil {
				return err
			}
		}
	}

	for _, p := range fresh {
		e.expire(p, now)
	}
	docs := e.group(fresh)
	start = time.Now()
	if err := e.load(ctx, docs, now); err != nil {
		return err
	}
	e.m.since("load", start)
	start = time.Now()
	var (
		reqs    []oplog.AppendRequest
		reqDocs []*docWork
	)
	for _, dw := range docs {
		if dw.work == nil {
			continue // its load failed; retried later
		}
		if req, ok := e.reduce(dw, results, now); ok {
			reqs = append(reqs, req)
			reqDocs = append(reqDocs, dw)
		}
	}
	for _, p := range bare {
		dw := bareWork(p)
		reqs = append(reqs, oplog.AppendRequest{DocumentID: dw.id, DocumentType: p.job.DocumentType, Jobs: dw.outcomes})
		reqDocs = append(reqDocs, dw)
	}
	e.m.since("reduce", start)
	if len(reqs) > 0 {
		nops := 0
		for i := range reqs {
			for _, sa := range reqs[i].Streams {
				nops += len(sa.Operations)
			}
		}
		e.m.batchOps.Observe(float64(nops))
		actx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
		start := time.Now()
		res, err := e.cfg.Store.Append(actx, reqs)
		e.m.since("append", start)
		cancel()
		if err == nil && len(res) != len(reqs) {
			err = fmt.Errorf("the store answered %d results for %d requests", len(res), len(reqs))
		}
		if err != nil {
			var included []*pending
			for _, dw := range reqDocs {
				for _, k := range dw.order {
					e.cache.Invalidate(k)
				}
				included = append(included, dw.included...)
			}
			return e.retryLater(ctx, included, fmt.Errorf("append batch of %d documents: %w", len(reqs), err), now)
		}
		if e.cfg.AfterAppend != nil {
			if err := e.cfg.AfterAppend(); err != nil {
				return &crashError{err: err}
			}
		}
		for i, dw := range reqDocs {
			e.settle(dw, &res[i], now)
		}
	}
	return e.flush(ctx)
}

// gather picks the jobs that may run now: per document, the jobs in order up
// to the first one that waits (backoff, dependency, model); a document's
// later jobs never overtake an earlier one.
//
// A job id is taken once per batch. A second record of a job (a producer
// retried a submit whose first produce had in fact landed) waits for the
// first to settle; the lookup then finds its result and the copy replays
// it, so one request never lists a job twice. A job that must go alone
// (after a refusal) runs in a batch as its document's only job.
func (e *Executor) gather(now time.Time) []*pending {
	var batch []*pending
	jobs := map[string]string{} // job id → its document, in this batch
	docs := map[string]bool{}   // documents with a job in this batch
	for _, ps := range e.sortedParts() {
		if e.paused.parts[ps.id] {
			continue
		}
		ps.walk(func(p *pending) bool {
			if p.notBefore.After(now) || e.paused.types[p.job.DocumentType] {
				return false
			}
			id, doc := p.job.JobID, p.documentID()
			if first, dup := jobs[id]; dup {
				if first != doc {
					// A copy in another document is not held back by
					// the first copy's document: poll, don't spin.
					p.notBefore = now.Add(e.cfg.DependencyPoll)
				}
				return false
			}
			single := p.alone || p.bare
			if single && docs[doc] {
				return false
			}
			jobs[id], docs[doc] = doc, true
			batch = append(batch, p)
			return !single
		})
	}
	return batch
}

// lookup asks the log, in one query, for the results of the batch's jobs and
// of the jobs their queueHints name (stage: lookup).
func (e *Executor) lookup(ctx context.Context, batch []*pending) (map[string]oplog.JobResult, error) {
	ids := make([]string, 0, len(batch))
	seen := map[string]bool{}
	for _, p := range batch {
		for _, id := range append([]string{p.job.JobID}, p.job.QueueHint...) {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	lctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
	defer cancel()
	return e.cfg.Store.JobResults(lctx, ids)
}

// group splits jobs by document, keeping partition order within each.
func (e *Executor) group(jobs []*pending) []*docWork {
	var docs []*docWork
	byID := map[string]*docWork{}
	for _, p := range jobs {
		dw := byID[p.documentID()]
		if dw == nil {
			dw = &docWork{id: p.documentID(), part: p.rec.Partition}
			byID[dw.id] = dw
			docs = append(docs, dw)
		}
		dw.jobs = append(dw.jobs, p)
	}
	return docs
}

// load fetches the head of every stream the batch's documents touch from the
// write cache (stage: load): first each document scope, whose state names
// the document's type, then the other scopes with that type. A document
// whose load fails keeps work nil and is retried later; an unavailable
// dependency fails the whole batch.
func (e *Executor) load(ctx context.Context, docs []*docWork, now time.Time) error {
	type item struct {
		dw      *docWork
		key     oplog.StreamKey
		docType string
		st      *model.StreamState
		err     error
	}
	run := func(items []item) {
		sem := make(chan struct{}, e.cfg.LoadConcurrency)
		var wg sync.WaitGroup
		for i := range items {
			it := &items[i]
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				lctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
				defer cancel()
				// Shared, not copied: reduce copies a stream before a
				// job changes it, so the held head is never touched.
				it.st, it.err = e.cache.LoadShared(lctx, it.dw.part, it.key, it.docType)
			})
		}
		wg.Wait()
	}
	loadErr := map[*docWork]error{}
	var unavailable error
	collect := func(items []item) {
		for _, it := range items {
			if it.err != nil {
				if isUnavailable(it.err) {
					unavailable = it.err
				}
				if loadErr[it.dw] == nil {
					loadErr[it.dw] = fmt.Errorf("load %s: %w", it.key, it.err)
				}
				continue
			}
			it.dw.before[it.key] = it.st.Revision
			it.dw.work[it.key] = it.st
		}
	}

	// Document scopes load with no type: a stored CREATE_DOCUMENT says it.
	var first []item
	for _, dw := range docs {
		dw.before = map[oplog.StreamKey]int64{}
		dw.work = map[oplog.StreamKey]*model.StreamState{}
		dw.ops = map[oplog.StreamKey][]oplog.Operation{}
		for _, p := range dw.jobs {
			k := oplog.StreamKey{DocumentID: dw.id, Scope: oplog.ScopeDocument, Branch: p.job.BranchOrDefault()}
			if dw.addStream(k) {
				first = append(first, item{dw: dw, key: k})
			}
		}
	}
	run(first)
	collect(first)
	var second []item
	for _, dw := range docs {
		if loadErr[dw] != nil {
			continue
		}
		for _, p := range dw.jobs {
			if p.fail != nil {
				continue
			}
			branch := p.job.BranchOrDefault()
			docType := p.job.DocumentType
			if doc := dw.work[oplog.StreamKey{DocumentID: dw.id, Scope: oplog.ScopeDocument, Branch: branch}]; doc.Revision > 0 {
				docType = doc.DocumentType
			}
			for _, a := range p.job.Actions {
				k := oplog.StreamKey{DocumentID: dw.id, Scope: a.Scope, Branch: branch}
				if dw.addStream(k) {
					second = append(second, item{dw: dw, key: k, docType: docType})
				}
			}
		}
	}
	run(second)
	collect(second)
	if unavailable != nil {
		return fmt.Errorf("load stream heads: %w", unavailable)
	}
	for _, dw := range docs {
		err := loadErr[dw]
		if err == nil {
			continue
		}
		dw.work = nil
		// A verdict already reached needs no heads: it is written bare
		// rather than wait for a load that may never succeed.
		var undecided []*pending
		for _, p := range dw.jobs {
			if p.fail != nil {
				p.bare = true
			} else {
				undecided = append(undecided, p)
			}
		}
		if len(undecided) == 0 {
			continue
		}
		var mnf *model.ModelNotFound
		if errors.As(err, &mnf) {
			// The log holds operations of a model version this member
			// does not know: a rolling upgrade is under way. Wait.
			e.park(undecided[0], waitModel, err, now)
			continue
		}
		if err := e.retryLater(ctx, undecided, err, now); err != nil {
			return err
		}
	}
	return nil
}

// reduce applies a document's ready jobs in order (stage: reduce) and builds
// its append request. A job that cannot succeed is settled FAILED in the same
// request, under the same head guard; a job that must wait stops the
// document there. ok is false when no job is settled.
func (e *Executor) reduce(dw *docWork, results map[string]oplog.JobResult, now time.Time) (oplog.AppendRequest, bool) {
	dw.wrote, dw.failed = map[string]bool{}, map[string]error{}
jobs:
	for _, p := range dw.jobs {
		j := p.job
		if p.fail != nil {
			dw.failJob(p, p.fail)
			continue
		}
		for _, h := range j.QueueHint {
			if jr, ok := results[h]; ok {
				if jr.Status == oplog.JobFailed {
					dw.failJob(p, &DependencyFailedError{Dependency: h})
					continue jobs
				}
				continue
			}
			if dw.wrote[h] {
				continue
			}
			if _, ok := dw.failed[h]; ok {
				dw.failJob(p, &DependencyFailedError{Dependency: h})
				continue jobs
			}
			e.park(p, waitDependency, nil, now)
			break jobs
		}
		branch := j.BranchOrDefault()
		docKey := oplog.StreamKey{DocumentID: dw.id, Scope: oplog.ScopeDocument, Branch: branch}
		// A create job on an existing document fails as DocumentExists
		// whatever its type, from CREATE_DOCUMENT itself.
		if doc := dw.work[docKey]; doc.Revision > 0 && doc.DocumentType != j.DocumentType && j.Kind != record.KindCreate {
			dw.failJob(p, &DocumentTypeMismatchError{DocumentID: dw.id, JobType: j.DocumentType, StoredType: doc.DocumentType})
			continue
		}
		if _, err := e.cfg.Registry.Latest(j.DocumentType); err != nil {
			e.park(p, waitModel, err, now)
			break
		}
		p.waiting, p.waitErr = "", nil

		actions := e.actionsOf(p)
		backups := map[oplog.StreamKey]*model.StreamState{}
		ops := make([]oplog.Operation, 0, len(actions))
		var applyErr error
		for n := range actions {
			a := &actions[n]
			k := oplog.StreamKey{DocumentID: dw.id, Scope: a.Scope, Branch: branch}
			st := dw.work[k]
			if st == nil {
				applyErr = &model.InvalidInput{Reason: fmt.Sprintf("actions[%d]: scope %q was not loaded", n, a.Scope)}
				break
			}
			// Reducers mutate in place: the job works on copies, so a
			// failure leaves the heads as the previous job left them.
			if _, ok := backups[k]; !ok {
				backups[k] = st
				st = st.Clone()
				dw.work[k] = st
			}
			applied, err := e.cfg.Registry.Apply(dw.work[docKey], st, a)
			if err != nil {
				applyErr = err
				break
			}
			ops = append(ops, oplog.Operation{
				OpID:           model.OpID(j.JobID, n),
				JobID:          j.JobID,
				DocumentID:     dw.id,
				DocumentType:   dw.work[docKey].DocumentType,
				Scope:          a.Scope,
				Branch:         branch,
				Index:          applied.Index,
				Hash:           applied.Hash,
				TimestampUtcMs: a.TimestampUtcMs,
				Version:        applied.Version,
				Action:         *a,
			})
		}
		if applyErr != nil {
			for k, st := range backups {
				dw.work[k] = st
			}
			var mnf *model.ModelNotFound
			if errors.As(applyErr, &mnf) {
				e.park(p, waitModel, applyErr, now)
				break
			}
			dw.failJob(p, applyErr)
			continue
		}
		for _, op := range ops {
			k := op.Stream()
			dw.ops[k] = append(dw.ops[k], op)
		}
		dw.included = append(dw.included, p)
		dw.outcomes = append(dw.outcomes, oplog.JobOutcome{JobID: j.JobID, Status: oplog.JobWriteReady})
		dw.wrote[j.JobID] = true
	}
	if len(dw.outcomes) == 0 {
		return oplog.AppendRequest{}, false
	}

	req := oplog.AppendRequest{DocumentID: dw.id, DocumentType: dw.included[0].job.DocumentType, Jobs: dw.outcomes}
	cond := &oplog.AppendCondition{}
	for _, k := range dw.order {
		st := dw.work[k]
		req.Streams = append(req.Streams, oplog.StreamAppend{Stream: k, ExpectedRevision: dw.before[k], Operations: dw.ops[k]})
		if k.Scope == oplog.ScopeDocument {
			cond.Streams = append(cond.Streams, oplog.ConditionStream{Stream: k, Revision: dw.before[k]})
			if st.DocumentType != "" {
				req.DocumentType = st.DocumentType
			}
		}
		if len(dw.ops[k]) > 0 && st.Revision/e.cfg.KeyframeInterval != dw.before[k]/e.cfg.KeyframeInterval {
			kf, err := st.Keyframe()
			if err != nil {
				e.log.Warn("keyframe skipped", zap.Stringer("stream", k), zap.Error(err))
				continue
			}
			req.Keyframes = append(req.Keyframes, kf)
		}
	}
	req.Condition = cond
	return req, true
}

// expire fails a job that has waited (for a dependency, for a model) longer
// than the job timeout. It runs before the heads load, since a model this
// member lacks can make the load itself what the job waits for.
func (e *Executor) expire(p *pending, now time.Time) {
	if p.fail != nil || p.waiting == "" {
		return
	}
	age := e.clock(now) - p.seen
	if age <= e.cfg.JobTimeout {
		return
	}
	if p.waiting == waitModel && p.waitErr != nil {
		p.fail = fmt.Errorf("no document model within the job timeout of %s: %w", e.cfg.JobTimeout, p.waitErr)
	} else {
		p.fail = &JobTimeoutError{Waited: age, Reason: "its queueHint dependencies did not complete"}
	}
}

// actionsOf returns the actions a job applies: a create job starts with the
// system action CREATE_DOCUMENT and a delete job ends with DELETE_DOCUMENT.
// Their ids derive from the job like the operation ids, and their timestamp
// is the job's, so a re-run writes the same operations.
func (e *Executor) actionsOf(p *pending) []oplog.Action {
	j := p.job
	ts := j.SubmittedAtUtcMs
	if ts == 0 {
		ts = p.rec.Timestamp.UnixMilli()
	}
	switch j.Kind {
	case record.KindCreate:
		input, _ := json.Marshal(model.CreateDocumentInput{DocumentType: j.DocumentType})
		sys := oplog.Action{ID: model.OpID(j.JobID, 0), Type: model.ActionCreateDocument, Scope: oplog.ScopeDocument, TimestampUtcMs: ts, Input: input}
		return append([]oplog.Action{sys}, j.Actions...)
	case record.KindDelete:
		sys := oplog.Action{ID: model.OpID(j.JobID, len(j.Actions)), Type: model.ActionDeleteDocument, Scope: oplog.ScopeDocument, TimestampUtcMs: ts, Input: json.RawMessage(`{}`)}
		return append(slices.Clone(j.Actions), sys)
	}
	return j.Actions
}

// bareWork is the share of a batch of a job whose FAILED verdict goes in a
// request of its own with no stream: the job id, which the log never
// settles twice, is its guard.
func bareWork(p *pending) *docWork {
	dw := &docWork{id: p.documentID(), part: p.rec.Partition, jobs: []*pending{p}, failed: map[string]error{}}
	dw.failJob(p, p.fail)
	return dw
}

// failJob settles a job as FAILED in its document's request.
func (dw *docWork) failJob(p *pending, err error) {
	history := append(slices.Clone(p.history), errorInfo(err))
	dw.included = append(dw.included, p)
	dw.outcomes = append(dw.outcomes, oplog.JobOutcome{JobID: p.job.JobID, Status: oplog.JobFailed, ErrorHistory: history})
	dw.failed[p.job.JobID] = err
}

// park makes a job wait, uncounted: for a dependency, polled every
// DependencyPoll; for a model, with backoff. The document's later jobs wait
// behind it, other documents go on.
func (e *Executor) park(p *pending, what string, err error, now time.Time) {
	if p.waiting != what {
		// Waiting for a dependency is the normal order of a document's
		// jobs (debug); waiting for a model this member lacks needs an
		// operator (info).
		level := zap.InfoLevel
		if what == waitDependency {
			level = zap.DebugLevel
		}
		e.log.Log(level, "job waits for its "+what, zap.String("job_id", p.job.JobID),
			zap.String("document_id", p.job.DocumentID), zap.Error(err))
	}
	p.waiting, p.waitErr = what, err
	p.waits++
	if what == waitDependency {
		p.notBefore = now.Add(e.cfg.DependencyPoll)
	} else {
		p.notBefore = now.Add(e.backoff(p.waits))
	}
}

// retryLater accounts a transient failure of jobs: an unavailable dependency
// is returned for the batch to retry without counting; anything else counts
// against each job's retries and backs off, failing the jobs that ran out.
func (e *Executor) retryLater(ctx context.Context, jobs []*pending, err error, now time.Time) error {
	if isUnavailable(err) || ctx.Err() != nil {
		return err
	}
	info := errorInfo(err)
	for _, p := range jobs {
		if p.fail != nil {
			// Its verdict is in: this was the write of its FAILED result,
			// which is retried without counting against the job (its
			// history ends with the attempts that led to the verdict).
			p.notBefore = now.Add(e.backoff(p.attempts))
			continue
		}
		p.attempts++
		p.history = append(p.history, info)
		if len(p.history) > maxHistory {
			p.history = slices.Delete(p.history, maxHistory/2, len(p.history)-maxHistory/2)
		}
		limit := e.cfg.MaxRetries
		if p.job.MaxRetries != nil {
			limit = *p.job.MaxRetries
		}
		if p.attempts > limit {
			if p.fail == nil {
				p.fail = &RetriesExhaustedError{Attempts: p.attempts, Last: err}
			}
			continue
		}
		p.notBefore = now.Add(e.backoff(p.attempts))
		e.m.retries.Inc()
		e.log.Warn("job retries after a transient error", zap.String("job_id", p.job.JobID),
			zap.String("document_id", p.job.DocumentID), zap.Int("attempt", p.attempts), zap.Error(err))
	}
	return nil
}

// settle handles one request's outcome: a committed (or replayed) request
// announces its jobs; a conflict reloads and retries, counted against the
// conflict budget only; an error the log refuses whatever the state fails
// the job that caused it.
func (e *Executor) settle(dw *docWork, res *oplog.AppendResult, now time.Time) {
	if res.Err == nil {
		for _, k := range dw.order {
			if res.Replayed {
				e.cache.Invalidate(k)
			} else {
				e.cache.Put(dw.part, dw.work[k])
			}
		}
		byID := make(map[string]oplog.JobResult, len(res.Jobs))
		for _, jr := range res.Jobs {
			byID[jr.JobID] = jr
		}
		for _, p := range dw.included {
			jr, ok := byID[p.job.JobID]
			if !ok {
				e.log.Error("append result lacks a job; it will be looked up again", zap.String("job_id", p.job.JobID), zap.String("document_id", dw.id))
				continue
			}
			e.m.jobs.WithLabelValues(string(jr.Status), "false").Inc()
			if jr.Status == oplog.JobWriteReady && p.job.SubmittedAtUtcMs > 0 {
				e.m.latency.Observe(max(float64(time.Now().UnixMilli()-p.job.SubmittedAtUtcMs), 0) / 1000)
			}
			e.announce(p, jr, res.Operations, now)
		}
		return
	}
	for _, k := range dw.order {
		e.cache.Invalidate(k)
	}
	if oplog.IsConflict(res.Err) {
		e.m.conflicts.Inc()
		for _, p := range dw.included {
			p.conflicts++
			if p.conflicts > e.cfg.ConflictBudget && p.fail == nil {
				p.fail = &ConflictBudgetExhaustedError{Conflicts: p.conflicts, Last: res.Err}
			}
			if p.conflicts > 1 {
				// Lost twice in a row: let the other writer through.
				p.notBefore = now.Add(rand.N(e.cfg.RetryBaseDelay + 1))
			}
		}
		e.log.Debug("append conflict: reloading", zap.String("document_id", dw.id), zap.Error(res.Err))
		return
	}
	// Refused whatever the state of the streams. Retrying the same request
	// would be refused again, so each refusal narrows it, after a backoff:
	// a request of several jobs splits into one request per job; a job
	// refused alone (or named by the refusal) is failed with the reason;
	// a verdict refused under the head guard is written bare; and a bare
	// verdict refused too is dead-lettered without a stored result.
	var dup *oplog.DuplicateOperation
	var culprit *pending
	if errors.As(res.Err, &dup) {
		for _, p := range dw.included {
			for n := range e.actionsOf(p) {
				if model.OpID(p.job.JobID, n) == dup.OpID {
					culprit = p
				}
			}
		}
	}
	if culprit == nil && len(dw.included) == 1 {
		culprit = dw.included[0]
	}
	for _, p := range dw.included {
		p.refusals++
		p.notBefore = now.Add(e.backoff(p.refusals))
		switch {
		case culprit == nil:
			p.alone = true
		case p != culprit:
		case p.fail == nil:
			p.fail = res.Err
			p.alone = true
		case !p.bare:
			p.bare = true
		default:
			e.log.Error("the log refused a job's bare FAILED verdict: dead-lettered without a stored result",
				zap.String("job_id", p.job.JobID), zap.String("document_id", dw.id), zap.Error(res.Err))
			e.announce(p, oplog.JobResult{JobID: p.job.JobID, DocumentID: dw.id, Status: oplog.JobFailed,
				ErrorHistory: append(slices.Clone(p.history), errorInfo(p.fail), errorInfo(res.Err))}, nil, now)
		}
	}
	e.log.Error("append refused", zap.String("document_id", dw.id), zap.Int("jobs", len(dw.included)), zap.Error(res.Err))
}

// reannounce rebuilds the announcement of a job that already has a result:
// a write-ready record from its stored ranges, or its dead letter.
func (e *Executor) reannounce(ctx context.Context, p *pending, jr oplog.JobResult, now time.Time) error {
	var ops []oplog.Operation
	if jr.Status == oplog.JobWriteReady {
		for _, r := range jr.Streams {
			rctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
			got, err := e.cfg.Store.ReadStream(rctx, r.Stream, r.FromIndex, int(r.ToIndex-r.FromIndex+1))
			cancel()
			if err != nil {
				return fmt.Errorf("read %s %d..%d: %w", r.Stream, r.FromIndex, r.ToIndex, err)
			}
			ops = append(ops, got...)
		}
	}
	e.log.Debug("job already has a result: announcing it again", zap.String("job_id", p.job.JobID),
		zap.String("document_id", p.job.DocumentID), zap.String("status", string(jr.Status)))
	e.m.jobs.WithLabelValues(string(jr.Status), "true").Inc()
	e.announce(p, jr, ops, now)
	return nil
}

// announce settles a job with the records that announce its result.
func (e *Executor) announce(p *pending, jr oplog.JobResult, ops []oplog.Operation, now time.Time) {
	var (
		out *kgo.Record
		err error
	)
	switch jr.Status {
	case oplog.JobWriteReady:
		out, err = e.writeReadyRecord(p, jr, ops, now)
		e.log.Debug("job committed", zap.String("job_id", p.job.JobID), zap.String("document_id", p.job.DocumentID))
	default:
		out, err = e.deadLetterRecord(p, jr, now)
	}
	p.settled = true
	if err != nil {
		e.log.Error("build announcement record", zap.String("job_id", p.job.JobID), zap.String("document_id", p.job.DocumentID), zap.Error(err))
		return
	}
	p.out = append(p.out[:0], out)
}

// writeReadyRecord builds the write-ready record of a committed job from its
// stored result and operations.
func (e *Executor) writeReadyRecord(p *pending, jr oplog.JobResult, all []oplog.Operation, now time.Time) (*kgo.Record, error) {
	var ops []oplog.Operation
	for _, op := range all {
		if op.JobID == jr.JobID {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("job %s is WRITE_READY but none of its operations was found", jr.JobID)
	}
	rank := map[oplog.StreamKey]int{}
	for i, r := range jr.Streams {
		rank[r.Stream] = i
	}
	slices.SortFunc(ops, func(a, b oplog.Operation) int {
		return cmp.Or(cmp.Compare(rank[a.Stream()], rank[b.Stream()]), cmp.Compare(a.Index, b.Index))
	})
	hashes := map[oplog.StreamKey]map[int64]string{}
	for _, op := range ops {
		if hashes[op.Stream()] == nil {
			hashes[op.Stream()] = map[int64]string{}
		}
		hashes[op.Stream()][op.Index] = op.Hash
	}
	wr := &record.WriteReady{
		JobID:            jr.JobID,
		DocumentID:       jr.DocumentID,
		DocumentType:     ops[0].DocumentType,
		Branch:           ops[0].Branch,
		ConsistencyToken: jr.Token,
		Operations:       ops,
		SubmittedAtUtcMs: p.job.SubmittedAtUtcMs,
		WrittenAtUtcMs:   now.UnixMilli(),
	}
	if !jr.CreatedAt.IsZero() {
		wr.WrittenAtUtcMs = jr.CreatedAt.UnixMilli()
	}
	for _, r := range jr.Streams {
		sw := record.StreamWrite{StreamRange: r}
		for i := r.FromIndex; i <= r.ToIndex; i++ {
			h, ok := hashes[r.Stream][i]
			if !ok {
				return nil, fmt.Errorf("job %s: operation %d of %s is missing", jr.JobID, i, r.Stream)
			}
			sw.Hashes = append(sw.Hashes, h)
		}
		wr.Streams = append(wr.Streams, sw)
	}
	return record.NewWriteReadyRecord(e.cfg.Topics.WriteReady, wr, e.cfg.InlineOperationsBytes)
}

// deadLetterRecord builds the dead letter of a failed job, classified by the
// name of its last error.
func (e *Executor) deadLetterRecord(p *pending, jr oplog.JobResult, now time.Time) (*kgo.Record, error) {
	if p.undecodable != nil {
		e.m.deadLetters.WithLabelValues(string(p.undecodable.ErrorType)).Inc()
		return record.NewDeadLetterRecord(e.cfg.Topics.DeadLetters, p.undecodable)
	}
	last := oplog.ErrorInfo{Name: NameError, Message: "the job failed without a recorded error"}
	if n := len(jr.ErrorHistory); n > 0 {
		last = jr.ErrorHistory[n-1]
	}
	dl := &record.DeadLetter{
		Job:       p.job,
		Error:     last,
		ErrorType: failureType(last),
		Attempts:  p.attempts + 1,
		Source:    record.SourceOf(p.rec),
		FailedAt:  now,
	}
	e.log.Info("job failed", zap.String("job_id", p.job.JobID), zap.String("document_id", p.job.DocumentID),
		zap.String("error_type", string(dl.ErrorType)), zap.String("error", last.Name+": "+last.Message))
	e.m.deadLetters.WithLabelValues(string(dl.ErrorType)).Inc()
	return record.NewDeadLetterRecord(e.cfg.Topics.DeadLetters, dl)
}
