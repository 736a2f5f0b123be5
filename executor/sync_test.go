package executor_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/executor/place"
	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

const placedType = "test/placed"

// placedModel is doclog/json under another type that asks for its ordinary
// jobs to be placed by timestamp.
type placedModel struct{ model.Model }

func (placedModel) PlacesByTimestamp() bool { return true }

func newPlacedModel() model.Model {
	base := jsondoc.Model()
	spec := model.Spec{DocumentType: placedType, ModelVersion: 1,
		Initial:    map[string]func() any{oplog.ScopeGlobal: func() any { return map[string]any{} }},
		ActionList: []*model.ActionSpec{}}
	for _, a := range base.Actions() {
		c := *a
		c.Scopes = []string{oplog.ScopeGlobal}
		spec.ActionList = append(spec.ActionList, &c)
	}
	return placedModel{model.MustSpec(spec)}
}

// mark is a merge patch that records name and makes it the last one: the
// state tells which operation was applied last, and its hash every order.
func mark(name string, ts int64) oplog.Action {
	return oplog.Action{ID: "act-" + name, Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal, TimestampUtcMs: ts,
		Input: json.RawMessage(fmt.Sprintf(`{%q:true,"last":%q}`, name, name))}
}

// rawLoad is a load job's record value built by hand, as a producer outside
// doclog would write it.
func rawLoad(jobID, docID, docType string, ops ...map[string]any) []byte {
	b, err := json.Marshal(map[string]any{
		"schema": "doclog.job.v1", "jobId": jobID, "kind": "load", "documentId": docID,
		"documentType": docType, "actions": []any{}, "operations": ops,
	})
	if err != nil {
		panic(err)
	}
	return b
}

func rawOp(opID string, index, skip int64, hash string, a oplog.Action) map[string]any {
	return map[string]any{"opId": opID, "index": index, "skip": skip, "hash": hash, "action": a}
}

// hashAfter is the hash a replica holding only these actions, in order,
// stores for the last.
func hashAfter(t *testing.T, actions ...oplog.Action) string {
	t.Helper()
	state := map[string]any{}
	for _, a := range actions {
		var patch any
		require.NoError(t, json.Unmarshal(a.Input, &patch))
		state = jsondoc.MergePatch(state, patch).(map[string]any)
	}
	h, _, err := model.Hash(state)
	require.NoError(t, err)
	return h
}

// produceRaw writes a job record's bytes to the jobs topic with a plain
// client.
func (b *bundle) produceRaw(docID string, value []byte) {
	b.t.Helper()
	b.produce(&kgo.Record{Topic: b.kenv.Names.Jobs, Key: []byte(docID), Value: value})
}

func lastError(jr oplog.JobResult) string {
	if len(jr.ErrorHistory) == 0 {
		return ""
	}
	return jr.ErrorHistory[len(jr.ErrorHistory)-1].Name
}

// Load jobs on the real stack: a load that continues the head is appended
// with its hashes checked; a backdated one is merged by timestamp and the
// tail it supersedes re-appended with a skip; each result counts, per
// stream, what was stored, replayed and reshuffled; each refusal (HASH_MISMATCH,
// EXCESSIVE_SHUFFLE, MISSING_OPERATIONS, and NON_MONOTONIC_TIMESTAMPS for a
// model placed by timestamp), produced as raw JSON with a plain Kafka
// client, fails its job with that name, stores nothing, dead-letters it
// with the same type, and the next job of the document commits.
func TestLoadJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, newPlacedModel())
	dlq := b.reader(b.kenv.Names.DeadLetters)
	cfg := b.config()
	cfg.MaxSkipThreshold = 3
	b.start(cfg)

	const doc = "doc-load"
	global := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	create := createJob(doc, jsondoc.DocumentType)
	local := mutateJob(doc, jsondoc.DocumentType, mark("a1", 10), mark("a2", 30))
	b.submit(create, local)
	b.waitResults([]string{create.JobID, local.JobID}, 30*time.Second)
	require.Len(t, b.readAll(global), 2)

	// b1 (stamped 20) was made on a replica holding nothing else: it
	// belongs between a1 and a2, so a2 is superseded and re-appended.
	b1 := mark("b1", 20)
	reshuffle := uuid.NewString()
	b.produceRaw(doc, rawLoad(reshuffle, doc, jsondoc.DocumentType, rawOp("op-b1", 0, 0, hashAfter(t, b1), b1)))
	jr := b.waitResults([]string{reshuffle}, 30*time.Second)[reshuffle]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	ops := b.readAll(global)
	var got []string
	for _, op := range ops {
		got = append(got, fmt.Sprintf("%d:%s/%d", op.Index, op.Action.ID, op.Skip))
	}
	require.Equal(t, []string{"0:act-a1/0", "1:act-a2/0", "2:act-b1/1", "3:act-a2/0"}, got)
	st, err := b.reg.ReplayStream(global, jsondoc.DocumentType, ops)
	require.NoError(t, err, "a replay reproduces every stored hash")
	require.Equal(t, "a2", st.State.(map[string]any)["last"])
	require.Equal(t, []oplog.StreamRange{{Stream: global, FromIndex: 2, ToIndex: 3}}, jr.Streams)
	require.Equal(t, &oplog.LoadSummary{Streams: []oplog.LoadStream{{Stream: global, Stored: 1, Reshuffled: 1, Skip: 1}}}, jr.Load,
		"b1 stored, a2 reshuffled after it, skip 1")

	// Loading the same operation again is a replay: nothing is written.
	again := uuid.NewString()
	b.produceRaw(doc, rawLoad(again, doc, jsondoc.DocumentType, rawOp("op-b1", 0, 0, hashAfter(t, b1), b1)))
	jr = b.waitResults([]string{again}, 30*time.Second)[again]
	require.Equal(t, oplog.JobWriteReady, jr.Status)
	require.Empty(t, jr.Streams)
	require.Equal(t, &oplog.LoadSummary{Streams: []oplog.LoadStream{{Stream: global, Replayed: 1}}}, jr.Load)
	require.Len(t, b.readAll(global), 4)

	// A load continuing the head, carrying the stream's last operation
	// (a replay) before a new one, appends the new one and moves nothing.
	ops = b.readAll(global)
	last := ops[len(ops)-1]
	c2 := mark("c2", 40)
	appendLoad := uuid.NewString()
	b.produceRaw(doc, rawLoad(appendLoad, doc, jsondoc.DocumentType,
		rawOp(last.OpID, last.Index, last.Skip, last.Hash, last.Action),
		rawOp("op-c2", last.Index+1, 0, hashAfter(t, mark("a1", 10), b1, mark("a2", 30), c2), c2)))
	jr = b.waitResults([]string{appendLoad}, 30*time.Second)[appendLoad]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	require.Equal(t, []oplog.StreamRange{{Stream: global, FromIndex: 4, ToIndex: 4}}, jr.Streams)
	require.Equal(t, &oplog.LoadSummary{Streams: []oplog.LoadStream{{Stream: global, Stored: 1, Replayed: 1}}}, jr.Load)
	ops = b.readAll(global)
	require.Len(t, ops, 5)
	require.Equal(t, "op-c2", ops[4].OpID)
	require.Zero(t, ops[4].Skip)

	c1 := mark("c1", 100000)
	placedDoc := "doc-placed"
	placedCreate := createJob(placedDoc, placedType)
	placedFirst := mutateJob(placedDoc, placedType, mark("p1", 10), mark("p3", 30))
	b.submit(placedCreate, placedFirst)
	b.waitResults([]string{placedCreate.JobID, placedFirst.JobID}, 30*time.Second)

	refusals := []struct {
		name   string
		doc    string
		stream oplog.StreamKey
		value  func(jobID string, revision int64) []byte
	}{
		{place.NameHashMismatch, doc, global, func(id string, rev int64) []byte {
			return rawLoad(id, doc, jsondoc.DocumentType, rawOp("op-c1", rev, 0, "bm90IHRoZSBoYXNo", c1))
		}},
		{place.NameExcessiveShuffle, doc, global, func(id string, _ int64) []byte {
			early := mark("early", 1)
			return rawLoad(id, doc, jsondoc.DocumentType, rawOp("op-early", 0, 0, hashAfter(t, early), early))
		}},
		{place.NameMissingOperations, doc, global, func(id string, rev int64) []byte {
			return rawLoad(id, doc, jsondoc.DocumentType, rawOp("op-c1", rev+2, 0, hashAfter(t, c1), c1))
		}},
		{place.NameNonMonotonicTimestamps, placedDoc, oplog.StreamKey{DocumentID: placedDoc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}, func(id string, _ int64) []byte {
			v, err := json.Marshal(map[string]any{"schema": "doclog.job.v1", "jobId": id, "kind": "mutate", "documentId": placedDoc,
				"documentType": placedType, "actions": []any{mark("x", 50), mark("y", 50)}})
			require.NoError(t, err)
			return v
		}},
	}
	h, err := ingest.NewHandler(ingest.Config{JobsTopic: b.kenv.Names.Jobs},
		ingest.Deps{Producer: b.producer, Results: b.store, Registry: b.reg})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// viaIngest submits what a raw record carries through the HTTP API
	// under an Idempotency-Key, and returns the job id the key derives.
	viaIngest := func(value []byte) string {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(value, &rec))
		path, body := "/v1/jobs", map[string]any{"documentId": rec["documentId"], "documentType": rec["documentType"], "actions": rec["actions"]}
		if rec["kind"] == "load" {
			path, body = "/v1/documents/"+rec["documentId"].(string)+"/load", map[string]any{"documentType": rec["documentType"], "operations": rec["operations"]}
		}
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(raw))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		key := uuid.NewString()
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		out, _ := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", out)
		return model.JobIDFromIdempotencyKey(key)
	}
	// status reads a job's status through GET /v1/jobs/{id}.
	status := func(id string) map[string]any {
		resp, err := http.Get(srv.URL + "/v1/jobs/" + id + "?wait=10s")
		require.NoError(t, err)
		defer resp.Body.Close()
		out := map[string]any{}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out
	}

	// GET /v1/jobs/{id} reports the reshuffle's load as it was stored.
	stream := map[string]any{"documentId": doc, "scope": oplog.ScopeGlobal, "branch": oplog.DefaultBranch}
	require.Equal(t, map[string]any{"streams": []any{map[string]any{"stream": stream,
		"stored": float64(1), "replayed": float64(0), "superseded": float64(0), "reshuffled": float64(1), "skip": float64(1)}}},
		status(reshuffle)["load"])

	for _, tc := range refusals {
		for _, through := range []string{"a raw record", "ingest"} {
			before := b.readAll(tc.stream)
			id := uuid.NewString()
			if through == "ingest" {
				id = viaIngest(tc.value(id, int64(len(before))))
			} else {
				b.produceRaw(tc.doc, tc.value(id, int64(len(before))))
			}
			next := mutateJob(tc.doc, jsondoc.DocumentType, mark(fmt.Sprintf("next-%s-%d", tc.name, len(before)), 1000+int64(len(before))))
			if tc.doc == placedDoc {
				next.DocumentType = placedType
			}
			b.submit(next)
			res := b.waitResults([]string{id, next.JobID}, 30*time.Second)
			require.Equal(t, oplog.JobFailed, res[id].Status, "%s through %s", tc.name, through)
			require.Equal(t, tc.name, lastError(res[id]), "%s through %s: %+v", tc.name, through, res[id].ErrorHistory)
			require.Equal(t, oplog.JobWriteReady, res[next.JobID].Status, "%s: the document's next job commits: %+v", tc.name, res[next.JobID].ErrorHistory)
			after := b.readAll(tc.stream)
			require.Equal(t, len(before)+1, len(after), "%s through %s: nothing of the refused job was stored", tc.name, through)
			require.Equal(t, next.JobID, after[len(after)-1].JobID)
			letters := dlq.deadLetters(30*time.Second, 1, func(d *record.DeadLetter) string {
				if d.Job != nil && d.Job.JobID == id {
					return id
				}
				return ""
			})
			require.Equal(t, record.ErrorType(tc.name), letters[id].ErrorType, tc.name)
			st := status(id)
			require.Equal(t, "FAILED", st["status"], "%s through %s: %v", tc.name, through, st)
			hist := st["errorHistory"].([]any)
			require.Equal(t, tc.name, hist[len(hist)-1].(map[string]any)["name"], "GET /v1/jobs/{id} names the refusal")
		}
	}

	// A job of the placed model stamped before stored operations is merged
	// with them like a load.
	backdated := mutateJob(placedDoc, placedType, mark("p2", 20))
	b.submit(backdated)
	jr = b.waitResults([]string{backdated.JobID}, 30*time.Second)[backdated.JobID]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	require.Nil(t, jr.Load, "an ordinary job placed by timestamp is no load")
	pk := oplog.StreamKey{DocumentID: placedDoc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	pops := b.readAll(pk)
	st, err = b.reg.ReplayStream(pk, placedType, pops)
	require.NoError(t, err)
	var order []string
	for _, i := range place.Effective(pops) {
		order = append(order, pops[i].Action.ID)
	}
	require.Equal(t, []string{"act-p1", "act-p2", "act-p3", "act-next-" + place.NameNonMonotonicTimestamps + "-2", "act-next-" + place.NameNonMonotonicTimestamps + "-3"}, order)
	require.Equal(t, int64(3), pops[len(pops)-4].Skip, "p3 and the next jobs' operations are superseded")
}

// A load job's operations are held to their document type's signature
// policy as an ordinary job's actions are: an unsigned one under required
// fails the job SIGNATURE_INVALID and stores nothing; a signed one loads.
func TestLoadJobSignatures(t *testing.T) {
	t.Parallel()
	s := setupSigned(t)
	const doc = "doc-signed-load"
	k := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	create := createJob(doc, jsondoc.DocumentType)
	s.submit(create)
	s.waitResults([]string{create.JobID}, 30*time.Second)

	unsigned := uuid.NewString()
	a := mark("u1", 10)
	s.bundle.produceRaw(doc, rawLoad(unsigned, doc, jsondoc.DocumentType, rawOp("op-u1", 0, 0, hashAfter(t, a), a)))
	signed := uuid.NewString()
	good := s.action(t, doc, "good")
	s.bundle.produceRaw(doc, rawLoad(signed, doc, jsondoc.DocumentType, map[string]any{"opId": "op-g1", "index": 0, "skip": 0,
		"hash": hashAfter(t, oplog.Action{Input: good["input"].(json.RawMessage)}), "action": good}))
	res := s.waitResults([]string{unsigned, signed}, 30*time.Second)
	require.Equal(t, oplog.JobFailed, res[unsigned].Status)
	require.Equal(t, string(record.ErrSignatureInvalid), lastError(res[unsigned]))
	require.Equal(t, oplog.JobWriteReady, res[signed].Status, "%+v", res[signed].ErrorHistory)
	ops := s.readAll(k)
	require.Len(t, ops, 1)
	require.Equal(t, "op-g1", ops[0].OpID)
	require.NotNil(t, ops[0].Action.Signature)
}

// TestLoadConvergence is the property on the real stack: two replicas, each
// its own log schema, topics and executor, receive the same operations made
// on two to four origins through load jobs produced as raw records, each
// origin's operations in its own order but cut into segments, sometimes
// resent, and interleaved differently on each replica. Every load commits,
// and for each of the 40 documents both replicas end with the state and
// hash of all the operations applied in (timestamp, opId) order, and streams
// whose replay reproduces every stored hash.
func TestLoadConvergence(t *testing.T) {
	t.Parallel()
	const cases = 40
	rng := rand.New(rand.NewPCG(7, 11))
	var (
		docs    []string
		chains  [][][]map[string]any // per case, per origin, the load operations
		expects []string             // per case, the expected head hash
		lasts   []string
	)
	for c := range cases {
		doc := fmt.Sprintf("conv-%02d", c)
		docs = append(docs, doc)
		var all []oplog.Action
		var byOrigin [][]map[string]any
		for o := range 2 + rng.IntN(3) {
			var acts []oplog.Action
			var ops []map[string]any
			ts := int64(rng.IntN(5))
			for k := range 1 + rng.IntN(4) {
				a := mark(fmt.Sprintf("c%02d-o%d-%d", c, o, k), ts)
				acts = append(acts, a)
				ops = append(ops, rawOp("op-"+a.ID, int64(k), 0, hashAfter(t, acts...), a))
				ts += 1 + int64(rng.IntN(3))
			}
			all = append(all, acts...)
			byOrigin = append(byOrigin, ops)
		}
		slices.SortFunc(all, func(a, b oplog.Action) int {
			return place.Key{TimestampUtcMs: a.TimestampUtcMs, OpID: "op-" + a.ID}.Compare(place.Key{TimestampUtcMs: b.TimestampUtcMs, OpID: "op-" + b.ID})
		})
		chains = append(chains, byOrigin)
		expects = append(expects, hashAfter(t, all...))
		lasts = append(lasts, all[len(all)-1].ID[len("act-"):])
	}
	// deliveries cuts every origin's operations into segments and
	// interleaves them, per document.
	deliveries := func(rng *rand.Rand, c int) [][]map[string]any {
		chain := chains[c]
		next := make([]int, len(chain))
		var out [][]map[string]any
		for {
			var open []int
			for o := range chain {
				if next[o] < len(chain[o]) {
					open = append(open, o)
				}
			}
			if len(open) == 0 {
				return out
			}
			o := open[rng.IntN(len(open))]
			from := next[o] - rng.IntN(next[o]+1)
			to := next[o] + 1 + rng.IntN(len(chain[o])-next[o])
			out = append(out, chain[o][from:to])
			next[o] = to
		}
	}
	type replica struct {
		b   *bundle
		ids []string
	}
	var replicas []*replica
	for r := range 2 {
		b := setup(t, 2)
		b.start(b.config())
		rep := &replica{b: b}
		var creates []*record.Job
		for _, doc := range docs {
			creates = append(creates, createJob(doc, jsondoc.DocumentType))
		}
		b.submit(creates...)
		order := rand.New(rand.NewPCG(uint64(r)+100, 5))
		var recs []*kgo.Record
		for c, doc := range docs {
			for _, seg := range deliveries(order, c) {
				id := uuid.NewString()
				rep.ids = append(rep.ids, id)
				recs = append(recs, &kgo.Record{Topic: b.kenv.Names.Jobs, Key: []byte(doc), Value: rawLoad(id, doc, jsondoc.DocumentType, seg...)})
			}
		}
		b.produce(recs...)
		replicas = append(replicas, rep)
	}
	for r, rep := range replicas {
		res := rep.b.waitResults(rep.ids, 60*time.Second)
		for _, id := range rep.ids {
			require.Equal(t, oplog.JobWriteReady, res[id].Status, "replica %d job %s: %+v", r, id, res[id].ErrorHistory)
		}
		for c, doc := range docs {
			k := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
			ops := rep.b.readAll(k)
			st, err := rep.b.reg.ReplayStream(k, jsondoc.DocumentType, ops)
			require.NoError(t, err, "replica %d %s: a replay reproduces every stored hash", r, doc)
			require.Equal(t, expects[c], st.Hash, "replica %d %s: the state of every operation in key order", r, doc)
			require.Equal(t, lasts[c], st.State.(map[string]any)["last"])
		}
	}
}
