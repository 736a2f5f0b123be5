package reduce_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor/reduce"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// These tests run reduce as the executor does, on heads built in memory:
// no Kafka, no Postgres.

const docID = "doc-1"

func reducer(t *testing.T, keyframeInterval int64) *reduce.Reducer {
	t.Helper()
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	return &reduce.Reducer{Registry: reg, KeyframeInterval: keyframeInterval}
}

func key(scope string) oplog.StreamKey {
	return oplog.StreamKey{DocumentID: docID, Scope: scope, Branch: oplog.DefaultBranch}
}

// fresh are the heads of a document that does not exist yet, as the write
// cache loads them: the document scope without a type, the others with the
// job's.
func fresh(scopes ...string) ([]oplog.StreamKey, map[oplog.StreamKey]*model.StreamState) {
	order := []oplog.StreamKey{key(oplog.ScopeDocument)}
	heads := map[oplog.StreamKey]*model.StreamState{key(oplog.ScopeDocument): model.NewStreamState(key(oplog.ScopeDocument), "")}
	for _, s := range scopes {
		order = append(order, key(s))
		heads[key(s)] = model.NewStreamState(key(s), jsondoc.DocumentType)
	}
	return order, heads
}

func patch(scope string, v any) oplog.Action {
	b, _ := json.Marshal(map[string]any{"k": v})
	return oplog.Action{ID: uuid.NewString(), Type: jsondoc.ActionMergePatch, Scope: scope, TimestampUtcMs: 1_700_000_000_000, Input: b}
}

func job(kind record.Kind, actions ...oplog.Action) reduce.Job {
	return reduce.Job{Job: &record.Job{JobID: uuid.NewString(), Kind: kind, DocumentID: docID, DocumentType: jsondoc.DocumentType,
		Actions: actions, SubmittedAtUtcMs: 1_700_000_000_000}}
}

func TestReduceAppliesJobsInOrder(t *testing.T) {
	t.Parallel()
	r := reducer(t, 10)
	order, heads := fresh(oplog.ScopeGlobal)
	create := job(record.KindCreate)
	mutate := job(record.KindMutate, patch(oplog.ScopeGlobal, 1), patch(oplog.ScopeGlobal, 2))
	res := r.Reduce(&reduce.Document{ID: docID, Jobs: []reduce.Job{create, mutate}, Streams: order, Heads: heads}, nil)

	require.Len(t, res.Verdicts, 2)
	for _, v := range res.Verdicts {
		require.Equal(t, reduce.Applied, v.Kind)
		require.True(t, v.Checked)
	}
	// The create job starts with the system action, ids from the job.
	require.Len(t, res.Verdicts[0].Ops, 1)
	require.Equal(t, model.ActionCreateDocument, res.Verdicts[0].Ops[0].Action.Type)
	require.Equal(t, model.OpID(create.JobID, 0), res.Verdicts[0].Ops[0].OpID)
	require.Equal(t, model.OpID(create.JobID, 0), res.Verdicts[0].Ops[0].Action.ID)
	require.Len(t, res.Verdicts[1].Ops, 2)
	for n, op := range res.Verdicts[1].Ops {
		require.Equal(t, model.OpID(mutate.JobID, n), op.OpID)
		require.Equal(t, int64(n), op.Index)
		require.Equal(t, jsondoc.DocumentType, op.DocumentType)
		require.NotEmpty(t, op.Hash)
	}

	req := res.Request
	require.NotNil(t, req)
	require.Equal(t, jsondoc.DocumentType, req.DocumentType)
	require.Equal(t, []oplog.JobOutcome{{JobID: create.JobID, Status: oplog.JobWriteReady}, {JobID: mutate.JobID, Status: oplog.JobWriteReady}}, req.Jobs)
	require.Len(t, req.Streams, 2)
	require.Equal(t, key(oplog.ScopeDocument), req.Streams[0].Stream)
	require.Zero(t, req.Streams[0].ExpectedRevision)
	require.Equal(t, res.Verdicts[0].Ops, req.Streams[0].Operations)
	require.Equal(t, res.Verdicts[1].Ops, req.Streams[1].Operations)
	require.Equal(t, &oplog.AppendCondition{Streams: []oplog.ConditionStream{{Stream: key(oplog.ScopeDocument), Revision: 0}}}, req.Condition)
	require.Empty(t, req.Keyframes, "no revision crossed a multiple of 10")

	// The given heads are never changed; the result's are copies.
	require.Zero(t, heads[key(oplog.ScopeGlobal)].Revision)
	require.Zero(t, heads[key(oplog.ScopeDocument)].Revision)
	require.EqualValues(t, 2, res.Heads[key(oplog.ScopeGlobal)].Revision)
	require.EqualValues(t, 1, res.Heads[key(oplog.ScopeDocument)].Revision)
	require.Equal(t, res.Heads[key(oplog.ScopeGlobal)].Hash, res.Verdicts[1].Ops[1].Hash)
}

// created reduces a create job and returns the document's heads after it.
func created(t *testing.T, r *reduce.Reducer, scopes ...string) ([]oplog.StreamKey, map[oplog.StreamKey]*model.StreamState) {
	t.Helper()
	order, heads := fresh(scopes...)
	res := r.Reduce(&reduce.Document{ID: docID, Jobs: []reduce.Job{job(record.KindCreate)}, Streams: order, Heads: heads}, nil)
	require.Equal(t, reduce.Applied, res.Verdicts[0].Kind)
	return order, res.Heads
}

func TestReduceFailedJobLeavesTheHeads(t *testing.T) {
	t.Parallel()
	r := reducer(t, 10)
	order, heads := created(t, r, oplog.ScopeGlobal)
	first := job(record.KindMutate, patch(oplog.ScopeGlobal, 1))
	bad := patch(oplog.ScopeGlobal, 2)
	bad.Type = "NO_SUCH_ACTION"
	// The second action is refused: the job's first action is undone too.
	failing := job(record.KindMutate, patch(oplog.ScopeGlobal, 3), bad)
	failing.History = []oplog.ErrorInfo{{Name: "Earlier", Message: "an earlier attempt"}}
	last := job(record.KindMutate, patch(oplog.ScopeGlobal, 4))
	res := r.Reduce(&reduce.Document{ID: docID, Jobs: []reduce.Job{first, failing, last}, Streams: order, Heads: heads}, nil)

	require.Equal(t, reduce.Applied, res.Verdicts[0].Kind)
	require.Equal(t, reduce.Failed, res.Verdicts[1].Kind)
	require.True(t, res.Verdicts[1].Checked, "it reached its reducers")
	require.Equal(t, model.NameUnknownActionType, model.ErrorName(res.Verdicts[1].Err))
	require.Equal(t, reduce.Applied, res.Verdicts[2].Kind)
	require.EqualValues(t, 1, res.Verdicts[2].Ops[0].Index, "the last job applies where the first left the stream")

	req := res.Request
	require.Len(t, req.Jobs, 3)
	require.Equal(t, oplog.JobFailed, req.Jobs[1].Status)
	require.Len(t, req.Jobs[1].ErrorHistory, 2, "the verdict adds its reason to the history")
	require.Equal(t, "Earlier", req.Jobs[1].ErrorHistory[0].Name)
	require.Equal(t, model.NameUnknownActionType, req.Jobs[1].ErrorHistory[1].Name)
	require.Equal(t, record.ErrInvalidAction, reduce.FailureType(req.Jobs[1].ErrorHistory[1]))
	require.Len(t, req.Streams[1].Operations, 2)
	require.Zero(t, req.Streams[1].ExpectedRevision, "the create job wrote the document scope only")
	require.EqualValues(t, 1, req.Streams[0].ExpectedRevision)
	require.EqualValues(t, 1, req.Condition.Streams[0].Revision)
}

func TestReduceQueueHints(t *testing.T) {
	t.Parallel()
	r := reducer(t, 10)
	order, heads := created(t, r, oplog.ScopeGlobal)
	done, failed, missing := uuid.NewString(), uuid.NewString(), uuid.NewString()
	results := map[string]oplog.JobResult{
		done:   {JobID: done, Status: oplog.JobWriteReady},
		failed: {JobID: failed, Status: oplog.JobFailed},
	}
	afterDone := job(record.KindMutate, patch(oplog.ScopeGlobal, 1))
	afterDone.QueueHint = []string{done}
	afterFailed := job(record.KindMutate, patch(oplog.ScopeGlobal, 2))
	afterFailed.QueueHint = []string{failed}
	// A job of the same batch counts as done once applied, as failed once
	// failed.
	afterApplied := job(record.KindMutate, patch(oplog.ScopeGlobal, 3))
	afterApplied.QueueHint = []string{afterDone.JobID}
	afterItsFailure := job(record.KindMutate, patch(oplog.ScopeGlobal, 4))
	afterItsFailure.QueueHint = []string{afterFailed.JobID}
	waits := job(record.KindMutate, patch(oplog.ScopeGlobal, 5))
	waits.QueueHint = []string{missing}
	behind := job(record.KindMutate, patch(oplog.ScopeGlobal, 6))
	jobs := []reduce.Job{afterDone, afterFailed, afterApplied, afterItsFailure, waits, behind}
	res := r.Reduce(&reduce.Document{ID: docID, Jobs: jobs, Streams: order, Heads: heads}, results)

	require.Equal(t, reduce.Applied, res.Verdicts[0].Kind)
	require.Equal(t, reduce.Failed, res.Verdicts[1].Kind)
	require.Equal(t, &reduce.DependencyFailedError{Dependency: failed}, res.Verdicts[1].Err)
	require.False(t, res.Verdicts[1].Checked)
	require.Equal(t, reduce.Applied, res.Verdicts[2].Kind)
	require.Equal(t, reduce.Failed, res.Verdicts[3].Kind)
	require.Equal(t, &reduce.DependencyFailedError{Dependency: afterFailed.JobID}, res.Verdicts[3].Err)
	require.Equal(t, reduce.Verdict{Kind: reduce.Park, Wait: reduce.WaitDependency}, res.Verdicts[4])
	require.Equal(t, reduce.None, res.Verdicts[5].Kind, "a document's later jobs wait behind one that waits")
	require.Len(t, res.Request.Jobs, 4)
	require.Equal(t, reduce.NameDependencyFailed, res.Request.Jobs[1].ErrorHistory[0].Name)
}

func TestReduceDecidedAndMismatchedJobsFail(t *testing.T) {
	t.Parallel()
	r := reducer(t, 10)
	order, heads := created(t, r, oplog.ScopeGlobal)
	decided := job(record.KindMutate, patch(oplog.ScopeGlobal, 1))
	decided.Fail = &reduce.RetriesExhaustedError{Attempts: 6, Last: fmt.Errorf("flaky")}
	other := job(record.KindMutate, patch(oplog.ScopeGlobal, 2))
	other.DocumentType = drive.DocumentType
	// A create job on an existing document fails as DocumentExists, from
	// CREATE_DOCUMENT itself, whatever its type.
	again := job(record.KindCreate)
	again.DocumentType = drive.DocumentType
	res := r.Reduce(&reduce.Document{ID: docID, Jobs: []reduce.Job{decided, other, again}, Streams: order, Heads: heads}, nil)

	require.Equal(t, reduce.Verdict{Kind: reduce.Failed, Err: decided.Fail}, res.Verdicts[0])
	require.Equal(t, reduce.Failed, res.Verdicts[1].Kind)
	require.Equal(t, &reduce.DocumentTypeMismatchError{DocumentID: docID, JobType: drive.DocumentType, StoredType: jsondoc.DocumentType}, res.Verdicts[1].Err)
	require.Equal(t, reduce.Failed, res.Verdicts[2].Kind)
	require.Equal(t, model.NameDocumentExists, model.ErrorName(res.Verdicts[2].Err))
	require.Equal(t, []string{reduce.NameRetriesExhausted, reduce.NameDocumentTypeMismatch, model.NameDocumentExists},
		[]string{res.Request.Jobs[0].ErrorHistory[0].Name, res.Request.Jobs[1].ErrorHistory[0].Name, res.Request.Jobs[2].ErrorHistory[0].Name})
	// Only failures: the request still lists the streams, without
	// operations, so the verdicts are written under the head guard.
	require.Len(t, res.Request.Streams, 2)
	for _, sa := range res.Request.Streams {
		require.Empty(t, sa.Operations)
	}
	require.Same(t, heads[key(oplog.ScopeGlobal)], res.Heads[key(oplog.ScopeGlobal)])
}

func TestReduceUnknownModelParks(t *testing.T) {
	t.Parallel()
	r := reducer(t, 10)
	order, heads := fresh(oplog.ScopeGlobal)
	unknown := job(record.KindCreate)
	unknown.DocumentType = "acme/unknown"
	res := r.Reduce(&reduce.Document{ID: docID, Jobs: []reduce.Job{unknown, job(record.KindMutate, patch(oplog.ScopeGlobal, 1))}, Streams: order, Heads: heads}, nil)
	require.Equal(t, reduce.Park, res.Verdicts[0].Kind)
	require.Equal(t, reduce.WaitModel, res.Verdicts[0].Wait)
	require.Equal(t, model.NameModelNotFound, model.ErrorName(res.Verdicts[0].Err))
	require.False(t, res.Verdicts[0].Checked)
	require.Equal(t, reduce.None, res.Verdicts[1].Kind)
	require.Nil(t, res.Request, "nothing is settled")
}

func TestReduceKeyframes(t *testing.T) {
	t.Parallel()
	r := reducer(t, 2)
	order, heads := fresh(oplog.ScopeGlobal)
	res := r.Reduce(&reduce.Document{ID: docID, Streams: order, Heads: heads, Jobs: []reduce.Job{
		job(record.KindCreate), job(record.KindMutate, patch(oplog.ScopeGlobal, 1), patch(oplog.ScopeGlobal, 2)),
	}}, nil)
	// The global scope crossed revision 2; the document scope, at 1, did not.
	require.Len(t, res.Request.Keyframes, 1)
	kf := res.Request.Keyframes[0]
	require.Equal(t, key(oplog.ScopeGlobal), kf.Stream)
	require.EqualValues(t, 1, kf.Index)
	require.Equal(t, res.Heads[key(oplog.ScopeGlobal)].Hash, kf.Hash)
}

// A large stream is keyframed by its size's spacing: its state of more
// than KeyframeBytes crosses revision 2 (the interval) without a keyframe,
// and gets one at twice the interval.
func TestReduceKeyframesSpacedByTheStateSize(t *testing.T) {
	t.Parallel()
	r := reducer(t, 2)
	order, heads := fresh(oplog.ScopeGlobal)
	big := strings.Repeat("x", model.KeyframeBytes) // one member a little over KeyframeBytes once encoded
	res := r.Reduce(&reduce.Document{ID: docID, Streams: order, Heads: heads, Jobs: []reduce.Job{
		job(record.KindCreate), job(record.KindMutate, patch(oplog.ScopeGlobal, big), patch(oplog.ScopeGlobal, big+"y")),
	}}, nil)
	require.Empty(t, res.Request.Keyframes, "revision 2 is not a multiple of 4, the spacing of a state over 128 KiB")
	global := res.Heads[key(oplog.ScopeGlobal)]
	require.Equal(t, int64(4), model.KeyframeSpacing(2, global.Size))

	heads = map[oplog.StreamKey]*model.StreamState{key(oplog.ScopeDocument): res.Heads[key(oplog.ScopeDocument)], key(oplog.ScopeGlobal): global}
	res = r.Reduce(&reduce.Document{ID: docID, Streams: order, Heads: heads, Jobs: []reduce.Job{
		job(record.KindMutate, patch(oplog.ScopeGlobal, big+"z"), patch(oplog.ScopeGlobal, big+"w")),
	}}, nil)
	require.Len(t, res.Request.Keyframes, 1)
	require.EqualValues(t, 3, res.Request.Keyframes[0].Index, "the keyframe at revision 4 holds operations 0-3")
}

func TestLoadFailed(t *testing.T) {
	t.Parallel()
	decided := job(record.KindMutate)
	decided.Fail = &reduce.JobTimeoutError{Reason: "r"}
	a, b := job(record.KindMutate), job(record.KindMutate)
	jobs := []reduce.Job{a, decided, b}

	mnf := fmt.Errorf("load %s: %w", key(oplog.ScopeGlobal), &model.ModelNotFound{DocumentType: jsondoc.DocumentType})
	require.Equal(t, []reduce.Verdict{
		{Kind: reduce.Park, Wait: reduce.WaitModel, Err: mnf},
		{Kind: reduce.Failed, Err: decided.Fail, Bare: true},
		{},
	}, reduce.LoadFailed(jobs, mnf))

	other := fmt.Errorf("load %s: %w", key(oplog.ScopeGlobal), fmt.Errorf("corrupt keyframe"))
	require.Equal(t, []reduce.Verdict{
		{Kind: reduce.Retry, Err: other},
		{Kind: reduce.Failed, Err: decided.Fail, Bare: true},
		{Kind: reduce.Retry, Err: other},
	}, reduce.LoadFailed(jobs, other))
}

func TestBare(t *testing.T) {
	t.Parallel()
	j := job(record.KindMutate)
	j.Fail = &reduce.JobTimeoutError{Reason: "r"}
	req := reduce.Bare(j)
	require.Equal(t, docID, req.DocumentID)
	require.Empty(t, req.Streams)
	require.Nil(t, req.Condition)
	require.Len(t, req.Jobs, 1)
	require.Equal(t, oplog.JobFailed, req.Jobs[0].Status)
	require.Equal(t, reduce.NameJobTimeout, req.Jobs[0].ErrorHistory[0].Name)
}

func TestActions(t *testing.T) {
	t.Parallel()
	a := patch(oplog.ScopeGlobal, 1)
	create := job(record.KindCreate, a)
	create.SubmittedAtUtcMs = 0
	create.ReceivedAtUtcMs = 42
	got := reduce.Actions(create)
	require.Len(t, got, 2)
	require.Equal(t, model.ActionCreateDocument, got[0].Type)
	require.EqualValues(t, 42, got[0].TimestampUtcMs, "without a submit time, the record's")
	del := job(record.KindDelete, a)
	got = reduce.Actions(del)
	require.Len(t, got, 2)
	require.Equal(t, model.ActionDeleteDocument, got[1].Type)
	require.Equal(t, model.OpID(del.JobID, 1), got[1].ID)
	require.Len(t, del.Actions, 1, "the job's own actions are not changed")
}

// The write-ready record announces the operations reduce built, with what
// only the log assigns taken from the rows the append returned.
func TestWriteReadyFromReducedOperations(t *testing.T) {
	t.Parallel()
	r := reducer(t, 10)
	order, heads := fresh(oplog.ScopeGlobal)
	create := job(record.KindCreate, patch(oplog.ScopeGlobal, 1))
	res := r.Reduce(&reduce.Document{ID: docID, Jobs: []reduce.Job{create}, Streams: order, Heads: heads}, nil)
	built := res.Verdicts[0].Ops
	require.Len(t, built, 2)

	written := time.UnixMilli(1_700_000_123_456).UTC()
	var rows []oplog.Operation
	for i, op := range built {
		op.Ordinal, op.TxID, op.WrittenAt = int64(100+i), 7, written
		rows = append(rows, op)
	}
	jr := oplog.JobResult{JobID: create.JobID, DocumentID: docID, Status: oplog.JobWriteReady, CreatedAt: written,
		Streams: []oplog.StreamRange{{Stream: key(oplog.ScopeDocument), FromIndex: 0, ToIndex: 0}, {Stream: key(oplog.ScopeGlobal), FromIndex: 0, ToIndex: 0}},
		Token:   oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{{DocumentID: docID, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}, {DocumentID: docID, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}}}}
	stored := reduce.Stored(built, &oplog.AppendResult{DocumentID: docID, Operations: rows, Jobs: []oplog.JobResult{jr}})
	require.Equal(t, rows, stored)
	require.Zero(t, built[0].Ordinal, "reduce's operations are not changed")

	wr, err := reduce.WriteReady(create.Job, jr, stored, time.Now())
	require.NoError(t, err)
	require.NoError(t, wr.Validate())
	require.Equal(t, rows, wr.Operations)
	require.Equal(t, jsondoc.DocumentType, wr.DocumentType)
	require.Equal(t, written.UnixMilli(), wr.WrittenAtUtcMs)
	require.Equal(t, create.SubmittedAtUtcMs, wr.SubmittedAtUtcMs)
	require.Equal(t, []string{built[0].Hash}, wr.Streams[0].Hashes)
	require.Equal(t, []string{built[1].Hash}, wr.Streams[1].Hashes)

	// A replay wrote nothing: the log's rows are the job's operations.
	other := slices.Clone(rows)
	other[1].Hash = "the-stored-one"
	require.Equal(t, other, reduce.Stored(built, &oplog.AppendResult{Operations: other, Replayed: true}))

	_, err = reduce.WriteReady(create.Job, jr, nil, time.Now())
	require.ErrorContains(t, err, "none of its operations was found")
	jr.Streams[1].ToIndex = 1
	_, err = reduce.WriteReady(create.Job, jr, stored, time.Now())
	require.ErrorContains(t, err, "operation 1 of")
}

// A run of many jobs over a large state, some failing, as a busy
// document's batch is: the copies a run made of the heads are discarded
// as the next job succeeds and their encodings' buffers reused, and every
// operation's hash is still a full replay's, the heads given to the run
// (still the cache's) unchanged.
func TestReduceManyJobsOverALargeState(t *testing.T) {
	t.Parallel()
	r := reducer(t, 1000)
	order, heads := created(t, r, oplog.ScopeGlobal)
	fill := map[string]any{}
	for i := range 3000 {
		fill[fmt.Sprintf("record-%05d", i)] = map[string]any{"n": i, "title": "a record of moderate length"}
	}
	in, err := json.Marshal(fill)
	require.NoError(t, err)
	grow := oplog.Action{ID: uuid.NewString(), Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal, TimestampUtcMs: 1_700_000_000_000, Input: in}
	res := r.Reduce(&reduce.Document{ID: docID, Jobs: []reduce.Job{job(record.KindMutate, grow)}, Streams: order, Heads: heads}, nil)
	require.Equal(t, reduce.Applied, res.Verdicts[0].Kind)
	ops := slices.Clone(res.Verdicts[0].Ops)
	heads = res.Heads
	given := heads[key(oplog.ScopeGlobal)]
	givenHash := given.Hash
	givenState := model.CloneJSON(given.State)

	var jobs []reduce.Job
	for i := range 24 {
		edit := oplog.Action{ID: uuid.NewString(), Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal, TimestampUtcMs: 1_700_000_000_000,
			Input: json.RawMessage(fmt.Sprintf(`{"record-%05d":{"n":%d}}`, (i*701)%3000, -i))}
		if i%5 == 3 {
			bad := patch(oplog.ScopeGlobal, i)
			bad.Type = "NO_SUCH_ACTION"
			jobs = append(jobs, job(record.KindMutate, edit, bad))
			continue
		}
		jobs = append(jobs, job(record.KindMutate, edit))
	}
	res = r.Reduce(&reduce.Document{ID: docID, Jobs: jobs, Streams: order, Heads: heads}, nil)
	for n, v := range res.Verdicts {
		if n%5 == 3 {
			require.Equal(t, reduce.Failed, v.Kind, "job %d", n)
			continue
		}
		require.Equal(t, reduce.Applied, v.Kind, "job %d", n)
		ops = append(ops, v.Ops...)
	}
	replayed, err := r.Registry.ReplayStream(key(oplog.ScopeGlobal), jsondoc.DocumentType, ops)
	require.NoError(t, err, "every stored hash is a replay's")
	head := res.Heads[key(oplog.ScopeGlobal)]
	require.Equal(t, replayed.Hash, head.Hash)
	kept, err := head.Canonical()
	require.NoError(t, err)
	full, err := model.Canonical(head.State)
	require.NoError(t, err)
	require.Equal(t, string(full), string(kept))

	require.Equal(t, givenHash, given.Hash)
	require.True(t, model.EqualJSON(givenState, given.State), "the head given to the run was changed")
	kept, err = given.Canonical()
	require.NoError(t, err)
	full, err = model.Canonical(given.State)
	require.NoError(t, err)
	require.Equal(t, string(full), string(kept), "the encoding of the head given to the run was written again")
}
