package executor_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// Two records of one job — a producer retried a submit after a 503 whose
// first produce had in fact landed — arrive in one poll. The first is
// applied, the copy replays its result, and the partition goes on. Before,
// the request listed the job twice, the log refused it, and the member
// retried the refusal without end.
func TestJobSeenTwiceInOnePollIsSettledOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	wr := b.reader(b.kenv.Names.WriteReady)

	create := createJob("doc-twice", jsondoc.DocumentType)
	patch := patchJob("doc-twice", 1)
	later := patchJob("doc-twice", 2)
	// The same job id on another document (a raw producer reusing an
	// idempotency-derived id): the first record reached wins.
	other := createJob("doc-other", jsondoc.DocumentType)
	stray := *patch
	stray.DocumentID = "doc-other"
	// All before the member starts, so that they come in one poll.
	b.submit(create, patch, patch, other, &stray, later, create)
	b.start(b.config())

	all := []*record.Job{create, patch, other, later}
	results := b.waitResults(ids(all), 30*time.Second)
	for _, j := range all {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status, "job %s: %+v", j.JobID, results[j.JobID].ErrorHistory)
	}
	// Every copy was settled: each job was announced once per record of it
	// (the first record's announcement, then the copies' replays).
	got := b.writeReadies(wr, ids(all), 30*time.Second)
	wr.until(30*time.Second, "seven write-ready records", func(recs []*kgo.Record) bool { return len(recs) >= 7 })
	got = b.writeReadies(wr, ids(all), time.Second)
	require.Len(t, got[create.JobID], 2)
	require.Len(t, got[patch.JobID], 3, "the patch, its copy and the stray copy on doc-other")
	require.Equal(t, "doc-twice", got[patch.JobID][2].DocumentID, "a replay announces the stored result")
	// Applied once: doc-twice holds create, patch and later, each once, and
	// doc-other holds only its create.
	b.checkDocument("doc-twice", jsondoc.DocumentType, []string{patch.JobID, later.JobID})
	ops := b.readAll(oplog.StreamKey{DocumentID: "doc-other", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
	require.Empty(t, ops, "the stray copy wrote nothing to doc-other")
	b.requireNoDeadLetters()
}

// A record refused as undecodable whose job id can be read gives that job
// a FAILED result with the reason, so its producer, asking by id, learns it
// failed instead of seeing PENDING forever; a later record of the same job
// replays that verdict.
func TestUndecodableRecordWithReadableJobIDGetsAFailedResult(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	dlq := b.reader(b.kenv.Names.DeadLetters)
	b.start(b.config())

	// Keyed by another document than it names: refused as DECODE_ERROR.
	misKeyed := createJob("doc-named", jsondoc.DocumentType)
	rec, err := record.NewJobRecord(b.kenv.Names.Jobs, misKeyed)
	require.NoError(t, err)
	rec.Key = []byte("doc-key")
	// An unknown field: the document id comes from the record.
	unknownField := createJob("doc-field", jsondoc.DocumentType)
	bad, err := record.NewJobRecord(b.kenv.Names.Jobs, unknownField)
	require.NoError(t, err)
	bad.Value = []byte(strings.Replace(string(bad.Value), `{`, `{"surprise":1,`, 1))
	// No readable job id: a dead letter only, as before.
	garbage := &kgo.Record{Topic: b.kenv.Names.Jobs, Key: []byte("doc-garbage"), Value: []byte(`{"jobId":"not-a-uuid"`)}
	b.produce(rec, bad, garbage)
	// The same job submitted properly afterwards: the first record wins.
	b.submit(misKeyed)
	after := createJob("doc-after", jsondoc.DocumentType)
	b.submit(after)

	results := b.waitResults(ids([]*record.Job{misKeyed, unknownField, after}), 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, results[after.JobID].Status)
	for j, reason := range map[*record.Job]string{misKeyed: "is not the job's documentId", unknownField: "surprise"} {
		r := results[j.JobID]
		require.Equal(t, oplog.JobFailed, r.Status)
		require.Len(t, r.ErrorHistory, 1)
		require.Equal(t, record.ErrorName, r.ErrorHistory[0].Name)
		require.Contains(t, r.ErrorHistory[0].Message, reason)
	}
	require.Equal(t, "doc-named", results[misKeyed.JobID].DocumentID, "the job's own documentId, read from the record")
	// Nothing was applied for the refused job, even by its later record.
	require.Empty(t, b.readAll(oplog.StreamKey{DocumentID: "doc-named", Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}))

	// Four dead letters: two undecodable with the raw records (the refused
	// ones), the garbage, and the replay of misKeyed's verdict.
	recs := dlq.until(30*time.Second, "four dead letters", func(recs []*kgo.Record) bool { return len(recs) >= 4 })
	var undecodable int
	for _, r := range recs {
		d, err := record.DecodeDeadLetter(r)
		require.NoError(t, err)
		require.Equal(t, record.ErrDecode, d.ErrorType)
		if d.Undecodable != nil {
			undecodable++
		}
	}
	require.Equal(t, 3, undecodable)
}

// refusingStore refuses, whatever the state of the streams, every request
// that settles one of the given jobs in a way it lists: a stand-in for a
// request the log calls invalid, which no correct executor builds.
type refusingStore struct {
	oplog.Store
	mu       sync.Mutex
	refuse   func(req *oplog.AppendRequest) bool
	refusals int
}

func (s *refusingStore) Append(ctx context.Context, reqs []oplog.AppendRequest) ([]oplog.AppendResult, error) {
	var pass []oplog.AppendRequest
	var at []int
	out := make([]oplog.AppendResult, len(reqs))
	s.mu.Lock()
	for i := range reqs {
		if s.refuse(&reqs[i]) {
			s.refusals++
			out[i].Err = &oplog.InvalidRequest{DocumentID: reqs[i].DocumentID, Reason: "refused by the test"}
			continue
		}
		pass = append(pass, reqs[i])
		at = append(at, i)
	}
	s.mu.Unlock()
	if len(pass) > 0 {
		res, err := s.Store.Append(ctx, pass)
		if err != nil {
			return nil, err
		}
		for k, i := range at {
			out[i] = res[k]
		}
	}
	return out, nil
}

func (s *refusingStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusals
}

func settles(req *oplog.AppendRequest, jobID string, status oplog.JobStatus, streams bool) bool {
	for _, j := range req.Jobs {
		if j.JobID == jobID && j.Status == status && (len(req.Streams) > 0) == streams {
			return true
		}
	}
	return false
}

// A request the log refuses whatever the state is never retried as it was:
// the batch is split until the refused job is alone, that job ends FAILED
// with the reason (its verdict written bare if the guarded one is refused
// too), the jobs beside it complete, and the refusals are few and spaced.
func TestRefusedRequestsEndInAVerdict(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	create := createJob("doc-refused", jsondoc.DocumentType)
	poison := patchJob("doc-refused", 1)
	after := patchJob("doc-refused", 2)
	hopeless := createJob("doc-hopeless", jsondoc.DocumentType)
	store := &refusingStore{Store: b.store, refuse: func(req *oplog.AppendRequest) bool {
		// poison: its write and its guarded verdict; hopeless: everything.
		return settles(req, poison.JobID, oplog.JobWriteReady, true) ||
			settles(req, poison.JobID, oplog.JobFailed, true) ||
			slices.ContainsFunc(req.Jobs, func(j oplog.JobOutcome) bool { return j.JobID == hopeless.JobID })
	}}
	dlq := b.reader(b.kenv.Names.DeadLetters)
	b.submit(create, poison, after, hopeless)
	cfg := b.config()
	cfg.Store = store
	b.start(cfg)

	results := b.waitResults(ids([]*record.Job{create, poison, after}), 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, results[create.JobID].Status)
	require.Equal(t, oplog.JobWriteReady, results[after.JobID].Status)
	r := results[poison.JobID]
	require.Equal(t, oplog.JobFailed, r.Status)
	require.Equal(t, oplog.NameInvalidRequest, r.ErrorHistory[len(r.ErrorHistory)-1].Name)
	require.Contains(t, r.ErrorHistory[len(r.ErrorHistory)-1].Message, "refused by the test")
	b.checkDocument("doc-refused", jsondoc.DocumentType, []string{after.JobID})

	// hopeless cannot be stored at all: it is dead-lettered with the
	// reason, without a result, and the member stops trying.
	dlq.until(30*time.Second, "two dead letters", func(recs []*kgo.Record) bool { return len(recs) >= 2 })
	var letters []*record.DeadLetter
	for _, rec := range dlq.recs {
		d, err := record.DecodeDeadLetter(rec)
		require.NoError(t, err)
		letters = append(letters, d)
	}
	require.ElementsMatch(t, []string{poison.JobID, hopeless.JobID}, []string{letters[0].Job.JobID, letters[1].Job.JobID})
	settled := store.count()
	time.Sleep(time.Second)
	require.Equal(t, settled, store.count(), "no refusal is retried once its jobs are settled")
	require.LessOrEqual(t, settled, 8, "each refusal narrows the request: a handful in all")
	res, err := b.store.JobResults(context.Background(), []string{hopeless.JobID})
	require.NoError(t, err)
	require.Empty(t, res)
}

// versionedModel is test/versioned at one version, with one no-op action.
func versionedModel(version int) model.Model {
	return model.MustSpec(model.Spec{
		DocumentType: "test/versioned",
		ModelVersion: version,
		Initial:      map[string]func() any{oplog.ScopeGlobal: func() any { return map[string]any{} }},
		ActionList: []*model.ActionSpec{{
			Type: "NOOP", Scopes: []string{oplog.ScopeGlobal},
			Reduce: func(state any, _ *model.Call) (any, error) { return state, nil },
		}},
	})
}

// A job whose document holds operations of a model version this member does
// not know waits for a member that knows it — and, like any wait, only for
// the job timeout: then it ends FAILED with the reason, although the heads it
// would need cannot even be loaded. Before, it waited without end.
func TestJobWaitingOnAnUnknownStoredVersionTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, versionedModel(2))
	writer := b.start(b.config())
	create := createJob("doc-v2", "test/versioned")
	noop := mutateJob("doc-v2", "test/versioned", action(oplog.ScopeGlobal, "NOOP", map[string]any{}))
	b.submit(create, noop)
	b.waitResults(ids([]*record.Job{create, noop}), 30*time.Second)
	writer.stop()

	old := b.config()
	old.Registry = registry(t, versionedModel(1))
	old.JobTimeout = time.Second
	b.start(old)
	stuck := mutateJob("doc-v2", "test/versioned", action(oplog.ScopeGlobal, "NOOP", map[string]any{}))
	other := createJob("doc-other", jsondoc.DocumentType)
	b.submit(stuck, other)
	results := b.waitResults(ids([]*record.Job{stuck, other}), 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, results[other.JobID].Status)
	r := results[stuck.JobID]
	require.Equal(t, oplog.JobFailed, r.Status)
	last := r.ErrorHistory[len(r.ErrorHistory)-1]
	require.Contains(t, last.Message, "no document model within the job timeout")
	require.Len(t, b.readAll(oplog.StreamKey{DocumentID: "doc-v2", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}), 1, "only the v2 job's operation")
}

// Once a look-up has found a partition's jobs unsettled, its later jobs go
// to the append without one: the log's guard refuses a job that has a
// result. A copy of a settled job arriving after that (a producer's retry
// far behind) is then replayed from its stored result, alone or beside a
// new job of its document in one request, and the new job is applied once.
func TestCopyOfASettledJobIsReplayedWithoutALookUp(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	wr := b.reader(b.kenv.Names.WriteReady)
	reg := prometheus.NewRegistry()
	cfg := b.config()
	cfg.Registerer = reg
	b.start(cfg)

	doc := "doc-copied"
	create, first := createJob(doc, jsondoc.DocumentType), patchJob(doc, 1)
	firstRecs := b.submit(create, first)
	b.waitResults(ids([]*record.Job{create, first}), 30*time.Second)

	// A new job after the check: applied with no look-up.
	lookups := stageCount(t, reg, "lookup")
	second := patchJob(doc, 2)
	b.submit(second)
	require.Equal(t, oplog.JobWriteReady, b.waitResults([]string{second.JobID}, 30*time.Second)[second.JobID].Status)
	require.Equal(t, lookups, stageCount(t, reg, "lookup"), "a new job of a checked partition was looked up")

	// The copy of the first patch, alone, then with a new job behind it in
	// one produce (so one poll and, most runs, one request).
	b.produce(copyRecord(firstRecs[1]))
	third := patchJob(doc, 3)
	b.produce(copyRecord(firstRecs[1]), mustJobRecord(t, b, third))
	fourth := patchJob(doc, 4)
	b.produce(copyRecord(firstRecs[1]), mustJobRecord(t, b, fourth))
	all := []*record.Job{create, first, second, third, fourth}
	results := b.waitResults(ids(all), 30*time.Second)
	for _, j := range all {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status, "job %s: %+v", j.JobID, results[j.JobID].ErrorHistory)
	}
	wr.until(30*time.Second, "the announcements of 5 jobs and 3 copies", func(recs []*kgo.Record) bool { return len(recs) >= 8 })
	got := b.writeReadies(wr, ids(all), time.Second)
	require.Len(t, got[first.JobID], 4, "the first patch and its three copies")
	for _, w := range got[first.JobID][1:] {
		require.Equal(t, got[first.JobID][0].Operations, w.Operations, "a copy announces the stored operations")
	}
	for _, j := range []*record.Job{create, second, third, fourth} {
		require.Len(t, got[j.JobID], 1, "job %s", j.JobID)
	}
	b.checkDocument(doc, jsondoc.DocumentType, []string{first.JobID, second.JobID, third.JobID, fourth.JobID})
	require.Zero(t, conflicts(t, reg), "a copy counted as a conflict")
	b.requireNoDeadLetters()
}

// copyRecord is a fresh record with rec's key, value and headers: what a
// producer's retry writes.
func copyRecord(rec *kgo.Record) *kgo.Record {
	return &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Headers: slices.Clone(rec.Headers)}
}

func mustJobRecord(t *testing.T, b *bundle, j *record.Job) *kgo.Record {
	t.Helper()
	r, err := record.NewJobRecord(b.kenv.Names.Jobs, j)
	require.NoError(t, err)
	return r
}

// stageCount reads how often the executor timed a stage.
func stageCount(t *testing.T, reg *prometheus.Registry, stage string) uint64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "doclog_executor_stage_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" && l.GetValue() == stage {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
