// Package reduce is the executor's pure core: given a document's share of a
// batch (its ready jobs and the heads of the streams they touch) it runs
// the reducers and returns a verdict per job and the document's append
// request; given what the append stored, it builds each committed job's
// write-ready record. Nothing here reaches Kafka or Postgres, so the
// executor and the projectors' test harness build their records with the
// same code, and the rules of a batch test without services.
//
// The failures the executor decides (retries or conflict budget exhausted,
// timeouts, failed dependencies, a document of another type) and their
// stable names live here too: a FAILED verdict carries its error history,
// flattened by ErrorInfo, which must know every one of them.
package reduce

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/doclog/doclog/executor/place"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// What a parked job waits for.
const (
	WaitDependency = "dependency"
	WaitModel      = "model"
)

// Kind is what a verdict decides for a job.
type Kind int

const (
	// None: reduce did not reach the job (an earlier job of its document
	// waits); it stays as it was.
	None Kind = iota
	// Applied: the job's operations are in the request, WRITE_READY.
	Applied
	// Failed: the job cannot succeed; its FAILED result is in the request,
	// under the same head guard, or (Bare) waits for a request of its own.
	Failed
	// Retry: a transient error, counted against the job's retries.
	Retry
	// Park: the job waits, uncounted, for Wait; its document's later jobs
	// wait behind it.
	Park
)

// Verdict is what reduce decided for one job.
type Verdict struct {
	Kind Kind
	// Ops are an Applied job's operations, in action order: what the
	// request writes and the write-ready record announces.
	Ops []oplog.Operation
	// Err is the reason of a Failed verdict, the error of a Retry, or what
	// a Park waits on (nil for a dependency without a result).
	Err error
	// Wait is what a parked job waits for: WaitDependency or WaitModel.
	Wait string
	// Checked: the job's dependencies and model were found, so it no longer
	// waits for either.
	Checked bool
	// Bare: a Failed verdict reached without the heads (their load failed),
	// to be written in a request of its own with no stream.
	Bare bool
}

// Job is one job of a document's share of a batch, as reduce sees it.
type Job struct {
	*record.Job
	// Fail is a verdict already reached (retries or budget exhausted, a
	// timeout): the job is failed without reducing.
	Fail error
	// History is the job's error history so far; a FAILED result adds its
	// reason.
	History []oplog.ErrorInfo
	// ReceivedAtUtcMs stamps the system actions of a job that carries no
	// submit time: its record's timestamp.
	ReceivedAtUtcMs int64
}

// Document is one document's share of a batch.
type Document struct {
	ID string
	// Jobs are its ready jobs, in partition order.
	Jobs []Job
	// Streams are the streams loaded, in first-use order, and Heads their
	// heads. Reduce never changes a head it is given: a job copies a
	// stream before it changes it.
	Streams []oplog.StreamKey
	Heads   map[oplog.StreamKey]*model.StreamState
	// Stored holds, for the streams a job placed by timestamp touches
	// (NeedsStored), what placement reads of the stream as the heads found
	// it: its operations from index 0, or from a window behind the head
	// with the state before it (place.Stored).
	Stored map[oplog.StreamKey]*place.Stored
}

// Result is what reducing a document decided.
type Result struct {
	// Verdicts has one verdict per job of the document, in order.
	Verdicts []Verdict
	// Request is the document's append request; nil when no job is
	// settled by it.
	Request *oplog.AppendRequest
	// Heads are the streams' heads after the applied jobs: the given head
	// for a stream no applied job changed, a copy otherwise. They become
	// the cache's once the request commits.
	Heads map[oplog.StreamKey]*model.StreamState
}

// Reducer runs a document's jobs through the document models.
type Reducer struct {
	Registry *model.Registry
	// KeyframeInterval: a request carries a keyframe for a stream whenever
	// its revision crosses a multiple of its spacing, this interval scaled
	// by the state's size (model.KeyframeDue).
	KeyframeInterval int64
	// Logger receives the keyframes skipped. Default: none.
	Logger *zap.Logger
	// MaxSkipThreshold bounds how many stored operations a placement by
	// timestamp may supersede (place.DefaultMaxSkipThreshold when 0).
	MaxSkipThreshold int64
}

// docRun is the state of one Reduce call.
type docRun struct {
	doc      *Document
	res      Result
	settled  []*Job // jobs settled by the request, in order
	outcomes []oplog.JobOutcome
	ops      map[oplog.StreamKey][]oplog.Operation
	wrote    map[string]bool  // jobs written as WRITE_READY in this request
	failed   map[string]error // jobs written as FAILED in this request
	// made are the copies this run took of the heads for its jobs'
	// actions, which only the run holds: once the job after the one that
	// made a copy succeeds, the copy is no one's (discardBackups).
	made map[*model.StreamState]bool
}

// savepoint starts a savepoint on st when the run made it (no one else
// holds it) and its changes can be recorded.
func (d *docRun) savepoint(st *model.StreamState) (*model.Savepoint, bool) {
	if !d.made[st] {
		return nil, false
	}
	return st.Savepoint()
}

// discardBackups drops the states a job that succeeded was applied over
// when this run made them: no one holds them any more, and Discard lets
// their encodings' buffers be reused. A head given to the run stays.
func (d *docRun) discardBackups(backups, work map[oplog.StreamKey]*model.StreamState) {
	for k, b := range backups {
		if d.made[b] && work[k] != b {
			delete(d.made, b)
			b.Discard()
		}
	}
}

func (d *docRun) fail(n int, err error) {
	j := &d.doc.Jobs[n]
	d.res.Verdicts[n] = Verdict{Kind: Failed, Err: err, Checked: d.res.Verdicts[n].Checked}
	d.settled = append(d.settled, j)
	d.outcomes = append(d.outcomes, failedOutcome(j, err))
	d.failed[j.JobID] = err
}

func failedOutcome(j *Job, err error) oplog.JobOutcome {
	history := append(slices.Clone(j.History), ErrorInfo(err))
	return oplog.JobOutcome{JobID: j.JobID, Status: oplog.JobFailed, ErrorHistory: history}
}

// Reduce applies a document's jobs in order and builds its append request.
// A job that cannot succeed is failed in the same request, under the same
// head guard; a job that must wait stops the document there. results are
// the stored results of the jobs the queueHints name.
func (r *Reducer) Reduce(doc *Document, results map[string]oplog.JobResult) Result {
	d := &docRun{
		doc:    doc,
		res:    Result{Verdicts: make([]Verdict, len(doc.Jobs)), Heads: make(map[oplog.StreamKey]*model.StreamState, len(doc.Heads))},
		ops:    map[oplog.StreamKey][]oplog.Operation{},
		wrote:  map[string]bool{},
		failed: map[string]error{},
		made:   map[*model.StreamState]bool{},
	}
	work := d.res.Heads
	for k, st := range doc.Heads {
		work[k] = st
	}
jobs:
	for n := range doc.Jobs {
		p := &doc.Jobs[n]
		if p.Fail != nil {
			d.fail(n, p.Fail)
			continue
		}
		for _, h := range p.QueueHint {
			if jr, ok := results[h]; ok {
				if jr.Status == oplog.JobFailed {
					d.fail(n, &DependencyFailedError{Dependency: h})
					continue jobs
				}
				continue
			}
			if d.wrote[h] {
				continue
			}
			if _, ok := d.failed[h]; ok {
				d.fail(n, &DependencyFailedError{Dependency: h})
				continue jobs
			}
			d.res.Verdicts[n] = Verdict{Kind: Park, Wait: WaitDependency}
			break jobs
		}
		branch := p.BranchOrDefault()
		docKey := oplog.StreamKey{DocumentID: doc.ID, Scope: oplog.ScopeDocument, Branch: branch}
		// A create job on an existing document fails as DocumentExists
		// whatever its type, from CREATE_DOCUMENT itself.
		if st := work[docKey]; st.Revision > 0 && st.DocumentType != p.DocumentType && p.Kind != record.KindCreate {
			d.fail(n, &DocumentTypeMismatchError{DocumentID: doc.ID, JobType: p.DocumentType, StoredType: st.DocumentType})
			continue
		}
		if _, err := r.Registry.Latest(p.DocumentType); err != nil {
			d.res.Verdicts[n] = Verdict{Kind: Park, Wait: WaitModel, Err: err}
			break
		}
		d.res.Verdicts[n].Checked = true

		actions := Actions(*p)
		backups := map[oplog.StreamKey]*model.StreamState{}
		var savepoints map[oplog.StreamKey]*model.Savepoint // made when a job takes one
		ops := make([]oplog.Operation, 0, len(actions))
		var (
			applyErr error
			load     *oplog.LoadSummary
		)
		placed := r.placed(p)
		if placed {
			ops, load, applyErr = r.place(d, p, work, backups)
		}
		for i := 0; !placed && i < len(actions); i++ {
			a := &actions[i]
			k := oplog.StreamKey{DocumentID: doc.ID, Scope: a.Scope, Branch: branch}
			st := work[k]
			if st == nil {
				applyErr = &model.InvalidInput{Reason: fmt.Sprintf("actions[%d]: scope %q was not loaded", i, a.Scope)}
				break
			}
			// Reducers mutate in place: the job works on copies, so a
			// failure leaves the heads as the previous job left them. A
			// copy the run made already needs none: a savepoint on it
			// brings it back instead.
			if _, ok := backups[k]; !ok {
				backups[k] = st
				if sp, ok := d.savepoint(st); ok {
					if savepoints == nil {
						savepoints = map[oplog.StreamKey]*model.Savepoint{}
					}
					savepoints[k] = sp
				} else {
					st = st.Clone()
					work[k] = st
					d.made[st] = true
				}
			}
			applied, err := r.Registry.Apply(work[docKey], st, a)
			if err != nil {
				applyErr = err
				break
			}
			ops = append(ops, oplog.Operation{
				OpID:           model.OpID(p.JobID, i),
				JobID:          p.JobID,
				DocumentID:     doc.ID,
				DocumentType:   work[docKey].DocumentType,
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
				work[k] = st
			}
			for _, sp := range savepoints {
				sp.Rollback()
			}
			var mnf *model.ModelNotFound
			if errors.As(applyErr, &mnf) {
				d.res.Verdicts[n] = Verdict{Kind: Park, Wait: WaitModel, Err: applyErr, Checked: true}
				break
			}
			d.fail(n, applyErr)
			continue
		}
		for _, sp := range savepoints {
			sp.Release()
		}
		if !placed {
			d.discardBackups(backups, work)
		}
		for _, op := range ops {
			k := op.Stream()
			d.ops[k] = append(d.ops[k], op)
		}
		d.res.Verdicts[n] = Verdict{Kind: Applied, Ops: ops, Checked: true}
		d.settled = append(d.settled, p)
		d.outcomes = append(d.outcomes, oplog.JobOutcome{JobID: p.JobID, Status: oplog.JobWriteReady, Load: load})
		d.wrote[p.JobID] = true
	}
	if len(d.outcomes) > 0 {
		d.res.Request = r.request(d)
	}
	return d.res
}

// request builds the append request of the document's settled jobs: every
// stream loaded with its expected revision, a read-set of its document
// scopes, and a keyframe for each stream whose revision crossed a multiple
// of the interval.
func (r *Reducer) request(d *docRun) *oplog.AppendRequest {
	doc, work := d.doc, d.res.Heads
	req := &oplog.AppendRequest{DocumentID: doc.ID, DocumentType: d.settled[0].DocumentType, Jobs: d.outcomes}
	cond := &oplog.AppendCondition{}
	for _, k := range doc.Streams {
		st, before := work[k], doc.Heads[k].Revision
		req.Streams = append(req.Streams, oplog.StreamAppend{Stream: k, ExpectedRevision: before, Operations: d.ops[k]})
		if k.Scope == oplog.ScopeDocument {
			cond.Streams = append(cond.Streams, oplog.ConditionStream{Stream: k, Revision: before})
			if st.DocumentType != "" {
				req.DocumentType = st.DocumentType
			}
		}
		if len(d.ops[k]) > 0 && model.KeyframeDue(before, st.Revision, r.KeyframeInterval, st.Size) {
			kf, err := st.Keyframe()
			if err != nil {
				if r.Logger != nil {
					r.Logger.Warn("keyframe skipped", zap.Stringer("stream", k), zap.Error(err))
				}
				continue
			}
			req.Keyframes = append(req.Keyframes, kf)
		}
	}
	req.Condition = cond
	return req
}

// LoadFailed decides for a document's jobs when its heads could not be
// loaded. A verdict already reached needs no heads: it is written bare
// rather than wait for a load that may never succeed. When the log holds
// operations of a model version this member does not know (a rolling
// upgrade is under way), the first undecided job waits for the model and
// the rest behind it; any other error is retried.
func LoadFailed(jobs []Job, err error) []Verdict {
	out := make([]Verdict, len(jobs))
	var mnf *model.ModelNotFound
	parkModel := errors.As(err, &mnf)
	first := true
	for n := range jobs {
		switch {
		case jobs[n].Fail != nil:
			out[n] = Verdict{Kind: Failed, Err: jobs[n].Fail, Bare: true}
		case parkModel && first:
			out[n] = Verdict{Kind: Park, Wait: WaitModel, Err: err}
			first = false
		case !parkModel:
			out[n] = Verdict{Kind: Retry, Err: err}
		}
	}
	return out
}

// Bare is the request of a job whose FAILED verdict goes alone with no
// stream: the job id, which the log never settles twice, is its guard.
func Bare(j Job) oplog.AppendRequest {
	return oplog.AppendRequest{DocumentID: j.DocumentID, DocumentType: j.DocumentType, Jobs: []oplog.JobOutcome{failedOutcome(&j, j.Fail)}}
}

// Actions returns the actions a job applies: a create job starts with the
// system action CREATE_DOCUMENT and a delete job ends with DELETE_DOCUMENT.
// Their ids derive from the job like the operation ids, and their timestamp
// is the job's, so a re-run writes the same operations.
func Actions(j Job) []oplog.Action {
	ts := j.SubmittedAtUtcMs
	if ts == 0 {
		ts = j.ReceivedAtUtcMs
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
