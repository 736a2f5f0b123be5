package executor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/executor/place"
	"github.com/doclog/doclog/executor/reduce"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// One batch (step): the jobs that may run now are looked up, their
// documents' heads loaded, reduced (executor/reduce decides each job's
// verdict and builds the append request), appended with one conditional
// Store.Append, and settled: committed jobs are handed to the announcer,
// conflicts and refusals accounted for the next batch.

// maxHistory bounds the error history kept per job: the first errors and
// the last say what happened; hundreds of identical retries do not.
const maxHistory = 16

// docWork is one document's share of a batch: its ready jobs, the heads of
// the streams they touch, and what reducing them decided.
type docWork struct {
	id   string
	part int32
	jobs []*pending // ready jobs, in partition order

	order []oplog.StreamKey // streams loaded, in first-use order
	heads map[oplog.StreamKey]*model.StreamState
	// stored holds what a job placed by timestamp reads of the streams it
	// places in (loadStored).
	stored map[oplog.StreamKey]*place.Stored
	// failed: the heads could not be loaded, so nothing is reduced.
	failed bool

	req  *oplog.AppendRequest
	work map[oplog.StreamKey]*model.StreamState // the heads after the request
	// included are the jobs the request settles, in order, and built the
	// operations reduce built for each (none for a FAILED one).
	included []*pending
	built    [][]oplog.Operation
}

func (dw *docWork) addStream(k oplog.StreamKey) bool {
	if slices.Contains(dw.order, k) {
		return false
	}
	dw.order = append(dw.order, k)
	return true
}

// reduceJob is the job as reduce sees it.
func (p *pending) reduceJob() reduce.Job {
	return reduce.Job{Job: p.job, Fail: p.fail, History: p.history, ReceivedAtUtcMs: p.rec.Timestamp.UnixMilli()}
}

// step runs one batch: look up, load, reduce and append the jobs that are
// ready, and settle them. It returns an error for the batch as a whole: an
// unavailable dependency, or the hook's crash.
func (e *Executor) step(ctx context.Context, now time.Time) error {
	if err := e.refreshPauses(ctx, now); err != nil {
		return err
	}
	batch := e.gather(now)
	if len(batch) == 0 {
		return nil
	}

	e.m.batchJobs.Observe(float64(len(batch)))
	var results map[string]oplog.JobResult // read only: nil when nothing was looked up
	if asked := e.needsLookup(batch); len(asked) > 0 {
		start := time.Now()
		var err error
		results, err = e.lookup(ctx, asked)
		e.m.since("lookup", start)
		if err != nil {
			return e.retryLater(ctx, batch, fmt.Errorf("look up job results: %w", err), now)
		}
		e.markChecked(asked, results)
	}
	start := time.Now()
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
	docs, branchDocs := splitBranchDocs(e.group(fresh))
	if err := e.refuseDeletedBranches(ctx, docs, now); err != nil {
		return err
	}
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
		if dw.failed {
			continue // retried later
		}
		if e.reduce(dw, results, now) {
			reqs = append(reqs, *dw.req)
			reqDocs = append(reqDocs, dw)
		}
	}
	planned, err := e.reduceBranches(ctx, branchDocs, results, now)
	if err != nil {
		return err
	}
	for _, dw := range planned {
		reqs = append(reqs, *dw.req)
		reqDocs = append(reqDocs, dw)
	}
	for _, p := range bare {
		reqs = append(reqs, reduce.Bare(p.reduceJob()))
		reqDocs = append(reqDocs, &docWork{id: p.documentID(), part: p.rec.Partition, jobs: []*pending{p},
			included: []*pending{p}, built: [][]oplog.Operation{nil}})
	}
	e.m.since("reduce", start)
	if len(reqs) == 0 {
		return nil
	}
	nops := 0
	for i := range reqs {
		for _, sa := range reqs[i].Streams {
			nops += len(sa.Operations)
		}
	}
	e.m.batchOps.Observe(float64(nops))
	actx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
	start = time.Now()
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
	if e.cfg.afterAppend != nil {
		if err := e.cfg.afterAppend(); err != nil {
			return &crashError{err: err}
		}
	}
	for i, dw := range reqDocs {
		e.settle(dw, &res[i], now)
	}
	return nil
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
//
// A batch carries at most MaxBatchOperations operations (one larger job goes
// alone). When the bound leaves jobs behind, the next batch starts at the
// next partition, so that a busy first partition does not keep the others
// waiting.
func (e *Executor) gather(now time.Time) []*pending {
	var (
		batch []*pending
		ops   int
		full  bool
	)
	jobs := map[string]string{} // job id → its document, in this batch
	docs := map[string]bool{}   // documents with a job in this batch
	parts := e.sortedParts()
	if n := len(parts); n > 1 {
		k := e.firstPart % n
		parts = slices.Concat(parts[k:], parts[:k])
	}
	for _, ps := range parts {
		if full {
			break
		}
		if e.paused.parts[ps.id] {
			continue
		}
		ps.walk(func(p *pending) bool {
			if full || p.notBefore.After(now) || e.paused.types[p.job.DocumentType] {
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
			// A branch job reads the branches as the document's earlier
			// jobs leave them: it goes alone.
			single := p.alone || p.bare || p.job.Kind.IsBranchKind()
			if single && docs[doc] {
				return false
			}
			n := p.job.OperationCount()
			if len(batch) > 0 && ops+n > e.cfg.MaxBatchOperations {
				full = true
				return false
			}
			ops += n
			jobs[id], docs[doc] = doc, true
			batch = append(batch, p)
			return !single
		})
	}
	if full {
		e.firstPart++
	}
	return batch
}

// needsLookup picks the jobs of a batch whose results are looked up before
// they run. The append refuses a job that has a result already (the log's
// guard), so a job known to be new needs no look-up of its own: that saves
// a round trip and an index probe per job in the common case. Looked up are
// the jobs that may have run before, which are those of a partition whose
// look-ups have not yet found its jobs unsettled (after an assignment the
// first records are the ones the previous owner may have applied without
// committing), jobs the log refused for a settled job, and jobs whose
// outcome depends on other results: queueHints, branch jobs, bare verdicts.
// A copy of a job that slips through (a producer's retry far behind) is
// refused by the append and then replayed from its result (see settle).
func (e *Executor) needsLookup(batch []*pending) []*pending {
	var asked []*pending
	for _, p := range batch {
		ps := e.parts[p.rec.Partition]
		if ps == nil || !ps.settledChecked || p.recheck || p.bare || len(p.job.QueueHint) > 0 || p.job.Kind.IsBranchKind() {
			asked = append(asked, p)
		}
	}
	return asked
}

// markChecked records, per partition, that a look-up found none of the
// partition's jobs settled.
func (e *Executor) markChecked(asked []*pending, results map[string]oplog.JobResult) {
	found := map[int32]bool{}
	for _, p := range asked {
		_, ok := results[p.job.JobID]
		found[p.rec.Partition] = found[p.rec.Partition] || ok
	}
	for id, settled := range found {
		if ps := e.parts[id]; ps != nil && !settled {
			ps.settledChecked = true
		}
	}
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
// whose load fails is decided by reduce.LoadFailed; an unavailable
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
			it.dw.heads[it.key] = it.st
		}
	}

	// Document scopes load with no type: a stored CREATE_DOCUMENT says it.
	var first []item
	for _, dw := range docs {
		dw.heads = map[oplog.StreamKey]*model.StreamState{}
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
			if doc := dw.heads[oplog.StreamKey{DocumentID: dw.id, Scope: oplog.ScopeDocument, Branch: branch}]; doc.Revision > 0 {
				docType = doc.DocumentType
			}
			for _, scope := range reduce.Scopes(p.job) {
				k := oplog.StreamKey{DocumentID: dw.id, Scope: scope, Branch: branch}
				if dw.addStream(k) {
					second = append(second, item{dw: dw, key: k, docType: docType})
				}
			}
		}
	}
	run(second)
	collect(second)
	if err := e.loadStored(ctx, docs, loadErr); err != nil && isUnavailable(err) {
		unavailable = err
	}
	if unavailable != nil {
		return fmt.Errorf("load stream heads: %w", unavailable)
	}
	for _, dw := range docs {
		err := loadErr[dw]
		if err == nil {
			continue
		}
		dw.failed = true
		jobs := make([]reduce.Job, len(dw.jobs))
		for i, p := range dw.jobs {
			jobs[i] = p.reduceJob()
		}
		var retry []*pending
		for i, v := range reduce.LoadFailed(jobs, err) {
			p := dw.jobs[i]
			switch v.Kind {
			case reduce.Failed:
				p.bare = v.Bare
			case reduce.Park:
				e.park(p, v.Wait, v.Err, now)
			case reduce.Retry:
				retry = append(retry, p)
			}
		}
		if len(retry) > 0 {
			if err := e.retryLater(ctx, retry, err, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// reduce runs a document's ready jobs through reduce (stage: reduce) and
// carries out the verdicts: a job settled by the request joins it, a job
// that must wait parks, and the document's later jobs wait behind it. It
// reports whether the document has a request.
func (e *Executor) reduce(dw *docWork, results map[string]oplog.JobResult, now time.Time) bool {
	doc := &reduce.Document{ID: dw.id, Jobs: make([]reduce.Job, len(dw.jobs)), Streams: dw.order, Heads: dw.heads, Stored: dw.stored}
	for i, p := range dw.jobs {
		doc.Jobs[i] = p.reduceJob()
	}
	res := e.reducer.Reduce(doc, results)
	for i, v := range res.Verdicts {
		p := dw.jobs[i]
		if v.Checked {
			p.waiting, p.waitErr = "", nil
		}
		switch v.Kind {
		case reduce.Applied, reduce.Failed:
			dw.included = append(dw.included, p)
			dw.built = append(dw.built, v.Ops)
		case reduce.Park:
			e.park(p, v.Wait, v.Err, now)
		}
	}
	dw.req, dw.work = res.Request, res.Heads
	return dw.req != nil
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
	if p.waiting == reduce.WaitModel && p.waitErr != nil {
		p.fail = fmt.Errorf("no document model within the job timeout of %s: %w", e.cfg.JobTimeout, p.waitErr)
	} else {
		p.fail = &JobTimeoutError{Waited: age, Reason: "its queueHint dependencies did not complete"}
	}
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
		if what == reduce.WaitDependency {
			level = zap.DebugLevel
		}
		e.log.Log(level, "job waits for its "+what, zap.String("job_id", p.job.JobID),
			zap.String("document_id", p.job.DocumentID), zap.Error(err))
	}
	p.waiting, p.waitErr = what, err
	p.waits++
	if what == reduce.WaitDependency {
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
	info := reduce.ErrorInfo(err)
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
		committed := reduce.NewCommitted(res)
		for i, p := range dw.included {
			jr, ok := byID[p.job.JobID]
			if !ok {
				e.log.Error("append result lacks a job; it will be looked up again", zap.String("job_id", p.job.JobID), zap.String("document_id", dw.id))
				continue
			}
			e.m.jobs.WithLabelValues(string(jr.Status), strconv.FormatBool(res.Replayed)).Inc()
			if jr.Status == oplog.JobWriteReady && p.job.SubmittedAtUtcMs > 0 && !res.Replayed {
				e.m.latency.Observe(max(float64(time.Now().UnixMilli()-p.job.SubmittedAtUtcMs), 0) / 1000)
			}
			e.announce(p, jr, committed.Stored(dw.built[i]), now)
		}
		return
	}
	for _, k := range dw.order {
		e.cache.Invalidate(k)
	}
	var settled *oplog.JobAlreadySettled
	if errors.As(res.Err, &settled) && !slices.ContainsFunc(dw.included, func(p *pending) bool { return p.recheck }) {
		// A job of the request ran before (a copy of its record, or one
		// the previous owner applied) and was not looked up: look the
		// request's jobs up and run them again, the settled one
		// announced from its result. Not counted: nothing was lost to
		// another writer.
		for _, p := range dw.included {
			p.recheck = true
		}
		e.log.Debug("append found a settled job: looking the jobs up", zap.String("document_id", dw.id), zap.Error(res.Err))
		return
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
			for n := range reduce.Actions(p.reduceJob()) {
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
				ErrorHistory: append(slices.Clone(p.history), reduce.ErrorInfo(p.fail), reduce.ErrorInfo(res.Err))}, nil, now)
		}
	}
	e.log.Error("append refused", zap.String("document_id", dw.id), zap.Int("jobs", len(dw.included)), zap.Error(res.Err))
}
