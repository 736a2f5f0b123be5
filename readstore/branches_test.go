package readstore_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/record"
)

// branchStack is the whole write path over a test's bundle: an executor
// applying the jobs topic to its log, ingest producing to it, and the
// projectors the bundle runs.
type branchStack struct {
	*bundle
	producer *kgo.Client
	ingest   *ingest.Handler
}

func newBranchStack(t *testing.T) *branchStack {
	// Streams of the change feed end after two seconds, so a test reads
	// one whole.
	b := setup(t, readstore.Config{FeedMaxAge: 2 * time.Second, FeedHeartbeat: time.Second})
	b.startProjectors()
	names := b.env.Kafka.Names
	e, err := executor.New(executor.Config{
		Store: b.env.Log, Registry: b.env.Registry, Kafka: b.env.Kafka.Config, Topics: names,
		Group: b.env.Kafka.Group("executor"), SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
		FetchMaxWait: 200 * time.Millisecond, RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 300 * time.Millisecond,
		StoreTimeout: 10 * time.Second, ProduceTimeout: 10 * time.Second, Logger: projtest.Logger(),
	})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
	})
	producer := b.env.Kafka.Client(ingest.ProducerOptions()...)
	ih, err := ingest.NewHandler(ingest.Config{JobsTopic: names.Jobs}, ingest.Deps{Producer: producer, Results: b.env.Log, Registry: b.env.Registry, Logger: projtest.Logger()})
	require.NoError(t, err)
	t.Cleanup(ih.Close)
	return &branchStack{bundle: b, producer: producer, ingest: ih}
}

// submit produces jobs with a plain client and waits for their results.
func (s *branchStack) submit(jobs ...*record.Job) map[string]oplog.JobResult {
	s.t.Helper()
	recs := make([]*kgo.Record, len(jobs))
	for i, j := range jobs {
		r, err := record.NewJobRecord(s.env.Kafka.Names.Jobs, j)
		require.NoError(s.t, err)
		recs[i] = r
	}
	return s.produceRaw(jobIDs(jobs), recs...)
}

func (s *branchStack) produceRaw(ids []string, recs ...*kgo.Record) map[string]oplog.JobResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(s.t, s.producer.ProduceSync(ctx, recs...).FirstErr())
	return s.results(ids)
}

func (s *branchStack) results(ids []string) map[string]oplog.JobResult {
	s.t.Helper()
	var got map[string]oplog.JobResult
	s.env.Eventually(func() bool {
		var err error
		got, err = s.env.Log.JobResults(context.Background(), ids)
		return err == nil && len(got) == len(ids)
	}, 30*time.Second, "every job has a result")
	return got
}

func jobIDs(jobs []*record.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.JobID
	}
	return out
}

func jsonJob(kind record.Kind, doc, branch string, actions ...oplog.Action) *record.Job {
	if actions == nil {
		actions = []oplog.Action{}
	}
	return &record.Job{JobID: uuid.NewString(), Kind: kind, DocumentID: doc, DocumentType: jsondoc.DocumentType, Branch: branch, Actions: actions}
}

func patch(v any) oplog.Action {
	raw, _ := json.Marshal(map[string]any{"v": v})
	return oplog.Action{ID: uuid.NewString(), Type: jsondoc.ActionMergePatch, Scope: oplog.ScopeGlobal, TimestampUtcMs: time.Now().UnixMilli(), Input: raw}
}

// documentAt reads the document view of a branch once it has the job's
// writes.
func (s *branchStack) documentAt(doc, branch string, jr oplog.JobResult) map[string]any {
	s.t.Helper()
	res := get(s.t, s.h, "/v1/documents/"+doc+"?branch="+branch+"&wait=20s&consistencyToken="+tokenOf(jr.Token))
	require.Equal(s.t, http.StatusOK, res.status, "%s", res.body)
	var body map[string]any
	res.decode(s.t, &body)
	return body
}

// submitHTTP posts a branch route to ingest and returns the job's id.
func (s *branchStack) submitHTTP(method, path, body string) string {
	s.t.Helper()
	var req *http.Request
	if body == "" {
		req = httptest.NewRequest(method, path, nil)
	} else {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	s.ingest.ServeHTTP(rec, req)
	require.Equal(s.t, http.StatusAccepted, rec.Code, "%s", rec.Body)
	var out struct{ JobID string }
	require.NoError(s.t, json.Unmarshal(rec.Body.Bytes(), &out))
	return out.JobID
}

// Branches through the whole stack: fork, writes on both branches, the
// list with tips and lineage, a stale promote through ingest (FAILED
// BranchConflict, nothing written), a promote (the document view of main
// equals draft's and a replay of the log), a delete (404 on every read of
// the branch, gone from the list), and the change feed's branch filter.
func TestBranchesThroughTheStack(t *testing.T) {
	t.Parallel()
	s := newBranchStack(t)
	doc := "branched-" + uuid.NewString()[:8]
	s.submit(jsonJob(record.KindCreate, doc, "main"), jsonJob(record.KindMutate, doc, "main", patch(1)))

	fork := jsonJob(record.KindFork, doc, "main")
	fork.Fork = &record.Fork{Branch: "draft"}
	onMain := jsonJob(record.KindMutate, doc, "main", patch("main"))
	onDraft := jsonJob(record.KindMutate, doc, "draft", patch("draft"))
	res := s.submit(fork, onMain, onDraft)
	for _, id := range jobIDs([]*record.Job{fork, onMain, onDraft}) {
		require.Equal(t, oplog.JobWriteReady, res[id].Status, "%+v", res[id].ErrorHistory)
	}
	draft := s.documentAt(doc, "draft", res[onDraft.JobID])
	main := s.documentAt(doc, "main", res[onMain.JobID])
	require.Equal(t, map[string]any{"v": "draft"}, draft["scopes"].(map[string]any)["global"].(map[string]any)["state"])
	require.Equal(t, map[string]any{"v": "main"}, main["scopes"].(map[string]any)["global"].(map[string]any)["state"])

	lr := get(t, s.h, "/v1/documents/"+doc+"/branches")
	require.Equal(t, http.StatusOK, lr.status, "%s", lr.body)
	var list struct {
		Branches []struct {
			Branch    string
			Tips      map[string]int64
			Base      string
			ForkPoint map[string]int64
		}
	}
	lr.decode(t, &list)
	require.Len(t, list.Branches, 2)
	require.Equal(t, "draft", list.Branches[0].Branch)
	require.Equal(t, "main", list.Branches[0].Base)
	require.Equal(t, map[string]int64{"document": 1, "global": 1}, list.Branches[0].ForkPoint)
	require.Equal(t, map[string]int64{"document": 1, "global": 2}, list.Branches[0].Tips)
	require.Equal(t, "main", list.Branches[1].Branch)
	require.Empty(t, list.Branches[1].Base)
	require.Equal(t, map[string]int64{"document": 1, "global": 2}, list.Branches[1].Tips)

	// Stale, through ingest: main is at global 2.
	stale := s.submitHTTP(http.MethodPost, "/v1/documents/"+doc+"/branches/draft/promote",
		`{"documentType":"doclog/json","onto":"main","expectedTip":{"document":1,"global":1}}`)
	jr := s.results([]string{stale})[stale]
	require.Equal(t, oplog.JobFailed, jr.Status)
	require.Equal(t, "BranchConflict", jr.ErrorHistory[len(jr.ErrorHistory)-1].Name)
	heads, err := s.env.Log.Revisions(context.Background(), doc, "main")
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"document": 1, "global": 2}, heads.Revision, "nothing written")

	promote := s.submitHTTP(http.MethodPost, "/v1/documents/"+doc+"/branches/draft/promote",
		`{"documentType":"doclog/json","onto":"main","expectedTip":{"document":1,"global":2}}`)
	jr = s.results([]string{promote})[promote]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	main = s.documentAt(doc, "main", jr)
	require.Equal(t, draft["scopes"].(map[string]any)["global"].(map[string]any)["state"], main["scopes"].(map[string]any)["global"].(map[string]any)["state"])
	require.Equal(t, draft["scopes"].(map[string]any)["global"].(map[string]any)["hash"], main["scopes"].(map[string]any)["global"].(map[string]any)["hash"])
	// The view equals a replay of the log.
	states, failed := s.env.Replay()
	require.Empty(t, failed)
	replayed, err := json.Marshal(states[oplog.StreamKey{DocumentID: doc, Scope: "global", Branch: "main"}].State)
	require.NoError(t, err)
	viewed, err := json.Marshal(main["scopes"].(map[string]any)["global"].(map[string]any)["state"])
	require.NoError(t, err)
	require.JSONEq(t, string(replayed), string(viewed))

	// The change feed's branch filter holds the promote's event on main.
	feed, _ := serve(s.h, "/v1/changes?documentId="+doc+"&branch=main&from=beginning")
	require.Equal(t, http.StatusOK, feed.status)
	require.Contains(t, string(feed.body), promote)
	require.NotContains(t, string(feed.body), onDraft.JobID, "draft's write is not on main's feed")

	del := s.submitHTTP(http.MethodDelete, "/v1/documents/"+doc+"/branches/draft?documentType=doclog/json", "")
	jr = s.results([]string{del})[del]
	require.Equal(t, oplog.JobWriteReady, jr.Status, "%+v", jr.ErrorHistory)
	for _, path := range []string{
		"/v1/documents/" + doc + "?branch=draft",
		"/v1/documents/" + doc + "/operations?branch=draft",
		"/v1/documents/" + doc + "/state?branch=draft",
		"/v1/documents/" + doc + "/relationships?branch=draft",
	} {
		r := get(t, s.h, path)
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", path, r.body)
		require.Equal(t, "branch_not_found", r.apiError(t).Error.Code, path)
	}
	r := get(t, s.h, "/v1/documents/"+doc+"?branch=never")
	require.Equal(t, http.StatusNotFound, r.status, "an unknown branch")
	lr = get(t, s.h, "/v1/documents/"+doc+"/branches")
	lr.decode(t, &list)
	require.Len(t, list.Branches, 1)
	require.Equal(t, "main", list.Branches[0].Branch)
	r = get(t, s.h, "/v1/documents/no-such-document/branches")
	require.Equal(t, http.StatusNotFound, r.status)
}
