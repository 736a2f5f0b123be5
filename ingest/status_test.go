package ingest_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
)

// newStore returns the real Postgres store on a fresh migrated schema.
func newStore(t *testing.T) *postgres.Store {
	t.Helper()
	ctx := testCtx(t)
	pool, err := pgxpool.New(ctx, testenv.PostgresSchema(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = postgres.Migrate(ctx, pool)
	require.NoError(t, err)
	return postgres.New(pool)
}

// v7At is a UUIDv7 made at the given time.
func v7At(t *testing.T, at time.Time) string {
	t.Helper()
	u, err := uuid.NewV7()
	require.NoError(t, err)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	copy(u[0:6], ms[2:8])
	return u.String()
}

func newV7(t *testing.T) string { return v7At(t, time.Now()) }

// writeReady appends a job with operations on two scopes of a document, the
// way an executor settles it, and returns its stored result.
func writeReady(t *testing.T, s *postgres.Store, jobID, docID string) oplog.JobResult {
	t.Helper()
	var streams []oplog.StreamAppend
	for _, scope := range []string{oplog.ScopeDocument, oplog.ScopeGlobal} {
		k := oplog.StreamKey{DocumentID: docID, Scope: scope, Branch: oplog.DefaultBranch}
		sa := oplog.StreamAppend{Stream: k}
		for i := range 2 {
			n := len(streams)*2 + i
			sa.Operations = append(sa.Operations, oplog.Operation{
				OpID: model.OpID(jobID, n), JobID: jobID, DocumentID: docID, DocumentType: "doclog/json",
				Scope: scope, Branch: k.Branch, Index: int64(i), Hash: "h", TimestampUtcMs: 1764460800000, Version: 1,
				Action: oplog.Action{ID: ingest.ActionID(jobID, n), Type: "MERGE_PATCH", Scope: scope, TimestampUtcMs: 1764460800000, Input: []byte(`{}`)},
			})
		}
		streams = append(streams, sa)
	}
	res, err := s.Append(testCtx(t), []oplog.AppendRequest{{
		DocumentID: docID, DocumentType: "doclog/json",
		Jobs:    []oplog.JobOutcome{{JobID: jobID, Status: oplog.JobWriteReady}},
		Streams: streams,
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Len(t, res[0].Jobs, 1)
	return res[0].Jobs[0]
}

// failed settles a job as FAILED under the document's head guard.
func failed(t *testing.T, s *postgres.Store, jobID, docID string) {
	t.Helper()
	res, err := s.Append(testCtx(t), []oplog.AppendRequest{{
		DocumentID: docID, DocumentType: "doclog/ledger",
		Jobs: []oplog.JobOutcome{{JobID: jobID, Status: oplog.JobFailed, ErrorHistory: []oplog.ErrorInfo{
			{Name: "BusinessRuleViolation", Message: "overdraft: balance would be -5", Cause: &oplog.ErrorInfo{Name: "Balance", Message: "-5"}},
		}}},
		Streams: []oplog.StreamAppend{{Stream: oplog.StreamKey{DocumentID: docID, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}}},
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
}

func status(t *testing.T, h http.Handler, path string) (int, map[string]any) {
	t.Helper()
	res := do(t, h, request{method: "GET", path: path})
	return res.status, res.json(t)
}

func TestJobStatusWithoutResult(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	h := newHandler(t, ingest.Config{}, ingest.Deps{Producer: failingProducer{}, Results: store})

	for name, id := range map[string]string{
		"fresh UUIDv7":            newV7(t),
		"UUIDv7 within retention": v7At(t, time.Now().Add(-6*24*time.Hour)),
		"idempotency-derived":     model.JobIDFromIdempotencyKey("k"),
		"direct producer's UUID":  uuid.NewString(),
	} {
		code, body := status(t, h, "/v1/jobs/"+id)
		require.Equal(t, http.StatusOK, code, name)
		require.Equal(t, map[string]any{"jobId": id, "status": "PENDING"}, body, name)
	}

	for name, tc := range map[string]struct{ id, message string }{
		"malformed":             {"nope", `id: "nope" is not a job id`},
		"uppercase":             {"01938F1E-7C2A-7B3E-9D4F-5A6B7C8D9E0F", "is not a job id"},
		"UUIDv7 past retention": {v7At(t, time.Now().Add(-8*24*time.Hour)), "past the jobs topic's retention"},
	} {
		res := do(t, h, request{method: "GET", path: "/v1/jobs/" + tc.id})
		require.Equal(t, http.StatusNotFound, res.status, name)
		e := res.apiError(t)
		require.Equal(t, ingest.CodeJobNotFound, e.Error.Code, name)
		require.Equal(t, "id", e.Error.Field, name)
		require.Contains(t, e.Error.Message, tc.message, name)
	}

	// A waiting request for an id past retention is answered at once.
	start := time.Now()
	res := do(t, h, request{method: "GET", path: "/v1/jobs/" + v7At(t, time.Now().Add(-8*24*time.Hour)) + "?wait=10s"})
	require.Equal(t, http.StatusNotFound, res.status)
	require.Less(t, time.Since(start), 5*time.Second)

	forever := newHandler(t, ingest.Config{JobsRetention: -1}, ingest.Deps{Producer: failingProducer{}, Results: store})
	code, _ := status(t, forever, "/v1/jobs/"+v7At(t, time.Now().Add(-800*24*time.Hour)))
	require.Equal(t, http.StatusOK, code, "a topic that keeps records forever never expires an id")

	for _, tc := range []struct{ query, field, message string }{
		{"?wait=soon", "wait", `wait: "soon" is not a duration`},
		{"?wait=-1s", "wait", "wait: must not be negative"},
		{"?colour=red", "colour", "colour: unknown query parameter"},
	} {
		res := do(t, h, request{method: "GET", path: "/v1/jobs/" + newV7(t) + tc.query})
		require.Equal(t, http.StatusBadRequest, res.status)
		e := res.apiError(t)
		require.Equal(t, tc.field, e.Error.Field)
		require.Contains(t, e.Error.Message, tc.message)
	}
}

func TestJobStatusFromTheStore(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	h := newHandler(t, ingest.Config{}, ingest.Deps{Producer: failingProducer{}, Results: store})

	ready := newV7(t)
	stored := writeReady(t, store, ready, "doc-s1")
	code, body := status(t, h, "/v1/jobs/"+ready)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "WRITE_READY", body["status"])
	require.Equal(t, "doc-s1", body["documentId"])
	require.Equal(t, []any{
		map[string]any{"documentId": "doc-s1", "scope": "document", "branch": "main", "index": float64(1)},
		map[string]any{"documentId": "doc-s1", "scope": "global", "branch": "main", "index": float64(1)},
	}, body["coordinates"])
	// The token is the read store's wire form of those coordinates, a
	// string a client copies as it is.
	token, ok := body["consistencyToken"].(string)
	require.True(t, ok, "consistencyToken is a string: %v", body["consistencyToken"])
	decoded, err := oplog.DecodeToken(token)
	require.NoError(t, err)
	require.Equal(t, stored.Token, decoded)
	require.Equal(t, oplog.EncodeToken(stored.Token), token)
	require.Len(t, body["streams"], 2)
	require.NotEmpty(t, body["completedAt"])
	require.Len(t, stored.Token.Coordinates, 2)

	fail := newV7(t)
	failed(t, store, fail, "doc-s2")
	code, body = status(t, h, "/v1/jobs/"+fail)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "FAILED", body["status"])
	require.Equal(t, []any{map[string]any{
		"name": "BusinessRuleViolation", "message": "overdraft: balance would be -5",
		"cause": map[string]any{"name": "Balance", "message": "-5"},
	}}, body["errorHistory"])
	require.NotContains(t, body, "consistencyToken")
	require.NotContains(t, body, "coordinates")

	// An id past retention that has a result reports it: the 404 rule is
	// for jobs without one.
	old := v7At(t, time.Now().Add(-30*24*time.Hour))
	writeReady(t, store, old, "doc-s3")
	code, body = status(t, h, "/v1/jobs/"+old)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "WRITE_READY", body["status"])

	// A waiting request for a settled job is answered at once.
	start := time.Now()
	code, body = status(t, h, "/v1/jobs/"+ready+"?wait=20s")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "WRITE_READY", body["status"])
	require.Less(t, time.Since(start), 5*time.Second)

	// READ_READY comes from the read side's seam once it reports the token
	// reached.
	rr := &readReadiness{}
	withView := newHandler(t, ingest.Config{}, ingest.Deps{Producer: failingProducer{}, Results: store, ReadReady: rr})
	_, body = status(t, withView, "/v1/jobs/"+ready)
	require.Equal(t, "WRITE_READY", body["status"], "not reached yet")
	rr.set(true)
	_, body = status(t, withView, "/v1/jobs/"+ready)
	require.Equal(t, "READ_READY", body["status"])
	require.Equal(t, stored.Token.Coordinates, rr.lastToken().Coordinates)
	_, body = status(t, withView, "/v1/jobs/"+fail)
	require.Equal(t, "FAILED", body["status"], "a failed job is never read ready")
}

// A load job's status carries what its placement did, per stream, as the
// store keeps it with the result; an ordinary job's carries no load.
func TestLoadJobStatusFromTheStore(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	h := newHandler(t, ingest.Config{}, ingest.Deps{Producer: failingProducer{}, Results: store})

	const doc = "doc-load-status"
	global := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	docScope := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}
	job := newV7(t)
	var ops []oplog.Operation
	for i := range 3 {
		ops = append(ops, oplog.Operation{
			OpID: model.OpID(job, i), JobID: job, DocumentID: doc, DocumentType: "doclog/json",
			Scope: global.Scope, Branch: global.Branch, Index: int64(i), Skip: int64(min(i, 1)), Hash: "h", TimestampUtcMs: 1764460800000, Version: 1,
			Action: oplog.Action{ID: ingest.ActionID(job, i), Type: "MERGE_PATCH", Scope: global.Scope, TimestampUtcMs: 1764460800000, Input: []byte(`{}`)},
		})
	}
	load := &oplog.LoadSummary{Streams: []oplog.LoadStream{
		{Stream: docScope, Replayed: 1},
		{Stream: global, Stored: 2, Replayed: 1, Superseded: 1, Reshuffled: 1, Skip: 1},
	}}
	res, err := store.Append(testCtx(t), []oplog.AppendRequest{{
		DocumentID: doc, DocumentType: "doclog/json",
		Jobs:    []oplog.JobOutcome{{JobID: job, Status: oplog.JobWriteReady, Load: load}},
		Streams: []oplog.StreamAppend{{Stream: docScope}, {Stream: global, Operations: ops}},
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	code, body := status(t, h, "/v1/jobs/"+job)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "WRITE_READY", body["status"])
	stream := func(k oplog.StreamKey) map[string]any {
		return map[string]any{"documentId": k.DocumentID, "scope": k.Scope, "branch": k.Branch}
	}
	require.Equal(t, map[string]any{"streams": []any{
		map[string]any{"stream": stream(docScope), "stored": float64(0), "replayed": float64(1), "superseded": float64(0), "reshuffled": float64(0), "skip": float64(0)},
		map[string]any{"stream": stream(global), "stored": float64(2), "replayed": float64(1), "superseded": float64(1), "reshuffled": float64(1), "skip": float64(1)},
	}}, body["load"])

	ordinary := newV7(t)
	writeReady(t, store, ordinary, "doc-load-status-2")
	_, body = status(t, h, "/v1/jobs/"+ordinary)
	require.Equal(t, "WRITE_READY", body["status"])
	require.NotContains(t, body, "load", "an ordinary job has no load")
}

type readReadiness struct {
	mu      sync.Mutex
	reached bool
	token   oplog.ConsistencyToken
}

func (r *readReadiness) set(v bool) { r.mu.Lock(); r.reached = v; r.mu.Unlock() }
func (r *readReadiness) lastToken() oplog.ConsistencyToken {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.token
}
func (r *readReadiness) ReadReady(_ context.Context, tok oplog.ConsistencyToken) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.token = tok
	return r.reached, nil
}

// TestWaitIsServedByOnePoller has many clients wait on a few jobs: they are
// all answered as soon as the results are written, and the store sees one
// lookup per tick, not one per client.
func TestWaitIsServedByOnePoller(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	reader := &countingReader{ResultReader: store}
	const interval = 20 * time.Millisecond
	h := newHandler(t, ingest.Config{PollInterval: interval}, ingest.Deps{Producer: failingProducer{}, Results: reader})

	jobs := []string{newV7(t), newV7(t), newV7(t)}
	const perJob = 30
	type answer struct {
		res  response
		req  *http.Request
		job  string
		took time.Time
	}
	answers := make(chan answer, perJob*len(jobs))
	start := time.Now()
	for _, job := range jobs {
		for range perJob {
			go func() {
				res, req := serve(h, request{method: "GET", path: "/v1/jobs/" + job + "?wait=30s"})
				answers <- answer{res: res, req: req, job: job, took: time.Now()}
			}()
		}
	}
	// Let every waiter join and the poller go round a few times.
	require.Eventually(t, func() bool { return reader.calls.Load() >= 5 }, 10*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.Empty(t, answers, "nobody is answered before the results exist")

	written := time.Now()
	for i, job := range jobs {
		writeReady(t, store, job, "doc-w"+string(rune('a'+i)))
	}
	for range perJob * len(jobs) {
		select {
		case a := <-answers:
			checkSpec(t, a.req, a.res)
			require.Equal(t, http.StatusOK, a.res.status)
			body := a.res.json(t)
			require.Equal(t, "WRITE_READY", body["status"])
			require.Equal(t, a.job, body["jobId"])
			require.Less(t, a.took.Sub(written), 2*time.Second, "answered as soon as the result is written")
		case <-time.After(10 * time.Second):
			t.Fatal("waiters were not answered after the results were written")
		}
	}
	elapsed := time.Since(start)
	calls := reader.calls.Load()
	ticks := int64(elapsed/interval) + 2
	require.LessOrEqual(t, calls, ticks, "one lookup per tick, whatever the number of waiters (%d clients)", perJob*len(jobs))
	require.Less(t, calls, int64(perJob*len(jobs)), "fewer lookups than waiting clients")
	require.LessOrEqual(t, reader.ids.Load(), calls*int64(len(jobs)), "each lookup asks for each waited-for job once")
}

func TestWaitEndsWithTheCurrentStatus(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	h := newHandler(t, ingest.Config{PollInterval: 10 * time.Millisecond}, ingest.Deps{Producer: failingProducer{}, Results: store})

	start := time.Now()
	code, body := status(t, h, "/v1/jobs/"+newV7(t)+"?wait=300ms")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "PENDING", body["status"])
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	// The wait is capped.
	capped := newHandler(t, ingest.Config{MaxWait: 200 * time.Millisecond}, ingest.Deps{Producer: failingProducer{}, Results: store})
	start = time.Now()
	code, _ = status(t, capped, "/v1/jobs/"+newV7(t)+"?wait=1h")
	require.Equal(t, http.StatusOK, code)
	require.Less(t, time.Since(start), 5*time.Second)
	start = time.Now()
	code, _ = status(t, capped, "/v1/jobs/"+newV7(t)+"?wait=1e300")
	require.Equal(t, http.StatusOK, code, "a number of seconds too large for a duration is capped too")
	require.Less(t, time.Since(start), 5*time.Second)

	// Closing the handler answers waiting clients at once.
	done := make(chan response, 1)
	go func() {
		res, _ := serve(h, request{method: "GET", path: "/v1/jobs/" + newV7UUID() + "?wait=30s"})
		done <- res
	}()
	time.Sleep(100 * time.Millisecond)
	h.Close()
	select {
	case res := <-done:
		require.Equal(t, http.StatusOK, res.status)
		require.Equal(t, "PENDING", res.json(t)["status"])
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting client was not answered on close")
	}
}

func newV7UUID() string { return uuid.Must(uuid.NewV7()).String() }

// brokenReader fails every lookup, as an unreachable database does.
type brokenReader struct{}

func (brokenReader) JobResults(context.Context, []string) (map[string]oplog.JobResult, error) {
	return nil, errors.New("connection refused")
}

func TestStatusWhenResultsCannotBeRead(t *testing.T) {
	t.Parallel()
	h := newHandler(t, ingest.Config{PollInterval: 10 * time.Millisecond}, ingest.Deps{Producer: failingProducer{}, Results: brokenReader{}})
	for _, q := range []string{"", "?wait=200ms"} {
		res := do(t, h, request{method: "GET", path: "/v1/jobs/" + newV7(t) + q})
		require.Equal(t, http.StatusServiceUnavailable, res.status, "not PENDING: the job could not be looked up")
		require.Equal(t, ingest.CodeResultsUnavailable, res.apiError(t).Error.Code)
	}
}

// TestPollBatchSplitsLookups bounds the ids of one lookup: more waiting jobs
// than PollBatch are looked up in several calls per tick.
func TestPollBatchSplitsLookups(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	reader := &countingReader{ResultReader: store}
	h := newHandler(t, ingest.Config{PollInterval: 50 * time.Millisecond, PollBatch: 2}, ingest.Deps{Producer: failingProducer{}, Results: reader})

	jobs := []string{newV7(t), newV7(t), newV7(t), newV7(t), newV7(t)}
	var wg sync.WaitGroup
	for _, job := range jobs {
		wg.Go(func() { serve(h, request{method: "GET", path: "/v1/jobs/" + job + "?wait=400ms"}) })
	}
	wg.Wait()
	calls, ids := reader.calls.Load(), reader.ids.Load()
	require.Positive(t, calls)
	require.LessOrEqual(t, ids, calls*2, "no lookup asks for more than PollBatch ids")
	require.GreaterOrEqual(t, calls, int64(3), "five waiting jobs take three lookups per tick")
}
