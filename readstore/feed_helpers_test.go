package readstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor/reduce"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/readstore/pgread"
	"github.com/doclog/doclog/record"
)

// logWriter appends real operations (reduced by the executor's reduce) to
// the log, many jobs of many documents in one transaction, as the
// executor's batches do.
type logWriter struct {
	t       testing.TB
	env     *projtest.Env
	reducer reduce.Reducer
	docs    map[string]*writerDoc
	seq     int
	clock   int64
}

type writerDoc struct {
	id, typ, branch string
	heads           map[oplog.StreamKey]*model.StreamState
}

// job is one job to commit: its document and actions.
type job struct {
	doc     string
	actions []oplog.Action
}

func newLogWriter(t testing.TB, env *projtest.Env) *logWriter {
	return &logWriter{t: t, env: env, reducer: reduce.Reducer{Registry: env.Registry, KeyframeInterval: 1 << 40},
		docs: map[string]*writerDoc{}, clock: 1_700_000_000_000}
}

func (w *logWriter) action(scope, typ string, input any) oplog.Action {
	b, err := json.Marshal(input)
	require.NoError(w.t, err)
	w.seq++
	w.clock += 1000
	return oplog.Action{ID: fmt.Sprintf("act-%d", w.seq), Type: typ, Scope: scope, TimestampUtcMs: w.clock, Input: b}
}

// create is the job creating a document (on branch, "" for main).
func (w *logWriter) create(id, typ, branch string) job {
	if branch == "" {
		branch = oplog.DefaultBranch
	}
	w.docs[id] = &writerDoc{id: id, typ: typ, branch: branch, heads: map[oplog.StreamKey]*model.StreamState{}}
	return job{doc: id, actions: []oplog.Action{w.action(oplog.ScopeDocument, model.ActionCreateDocument,
		model.CreateDocumentInput{DocumentType: typ, Name: "doc " + id})}}
}

func (w *logWriter) patch(id, scope string, n int) job {
	return job{doc: id, actions: []oplog.Action{w.action(scope, jsondoc.ActionMergePatch, map[string]any{"n": n})}}
}

func (w *logWriter) link(parent, child, typ string, add bool) job {
	a := model.ActionRemoveRelationship
	if add {
		a = model.ActionAddRelationship
	}
	return job{doc: parent, actions: []oplog.Action{w.action(oplog.ScopeDocument, a, model.RelationshipInput{TargetID: child, Type: typ})}}
}

func (w *logWriter) rename(id string) job {
	return job{doc: id, actions: []oplog.Action{w.action(oplog.ScopeDocument, model.ActionSetName, model.SetNameInput{Name: fmt.Sprintf("name %d", w.seq)})}}
}

func (w *logWriter) remove(id string) job {
	return job{doc: id, actions: []oplog.Action{w.action(oplog.ScopeDocument, model.ActionDeleteDocument, struct{}{})}}
}

// commit appends the jobs in one transaction, each document's in the given
// order, and returns the stored rows.
func (w *logWriter) commit(jobs ...job) []oplog.Operation {
	w.t.Helper()
	var order []string
	byDoc := map[string][]reduce.Job{}
	for _, j := range jobs {
		d := w.docs[j.doc]
		require.NotNil(w.t, d, "document %s was never created", j.doc)
		if _, ok := byDoc[j.doc]; !ok {
			order = append(order, j.doc)
		}
		byDoc[j.doc] = append(byDoc[j.doc], reduce.Job{Job: &record.Job{JobID: uuid.NewString(), Kind: record.KindMutate,
			DocumentID: d.id, DocumentType: d.typ, Branch: d.branch, Actions: j.actions}})
	}
	var reqs []oplog.AppendRequest
	results := make([]reduce.Result, len(order))
	for i, id := range order {
		d := w.docs[id]
		doc := &reduce.Document{ID: id, Jobs: byDoc[id], Heads: map[oplog.StreamKey]*model.StreamState{}}
		scopes := []string{oplog.ScopeDocument}
		for _, j := range byDoc[id] {
			for _, a := range j.Actions {
				if !slices.Contains(scopes, a.Scope) {
					scopes = append(scopes, a.Scope)
				}
			}
		}
		for _, s := range scopes {
			k := oplog.StreamKey{DocumentID: id, Scope: s, Branch: d.branch}
			st, ok := d.heads[k]
			if !ok {
				st = model.NewStreamState(k, d.typ)
			}
			doc.Streams = append(doc.Streams, k)
			doc.Heads[k] = st
		}
		results[i] = w.reducer.Reduce(doc, nil)
		for n, v := range results[i].Verdicts {
			require.Equal(w.t, reduce.Applied, v.Kind, "job %d of %s: %v", n, id, v.Err)
		}
		reqs = append(reqs, *results[i].Request)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := w.env.Log.Append(ctx, reqs)
	require.NoError(w.t, err)
	var rows []oplog.Operation
	for i, r := range out {
		require.NoError(w.t, r.Err)
		for k, st := range results[i].Heads {
			w.docs[order[i]].heads[k] = st
		}
		rows = append(rows, r.Operations...)
	}
	return rows
}

// feedServer is a read store serving the feed over real HTTP.
type feedServer struct {
	t    *testing.T
	env  *projtest.Env
	cfg  readstore.Config
	srv  *readstore.Server
	base string
}

// startFeed starts a read store on cfg.Addr (127.0.0.1:0 when empty) over
// the env's log (or log, when not nil).
func startFeed(t *testing.T, env *projtest.Env, cfg readstore.Config, log readstore.Log) *feedServer {
	t.Helper()
	return startFeedOn(t, env, cfg, log, nil)
}

// startFeedWith is startFeed with the server's metrics in reg.
func startFeedWith(t *testing.T, env *projtest.Env, cfg readstore.Config, reg prometheus.Registerer) *feedServer {
	t.Helper()
	return startFeedOn(t, env, cfg, nil, reg)
}

func startFeedOn(t *testing.T, env *projtest.Env, cfg readstore.Config, log readstore.Log, reg prometheus.Registerer) *feedServer {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if log == nil {
		log = env.Log
	}
	srv, err := readstore.NewServer(cfg, readstore.Deps{Store: pgread.New(env.Pool), Log: log, Registry: env.Registry, Logger: projtest.Logger(), Registerer: reg})
	require.NoError(t, err)
	require.NoError(t, srv.Start(context.Background()))
	fs := &feedServer{t: t, env: env, cfg: cfg, srv: srv, base: "http://" + srv.Addr().String()}
	t.Cleanup(func() { _ = fs.stop() })
	return fs
}

func (fs *feedServer) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fs.srv.Stop(ctx)
}

// frame is one Server-Sent Event.
type frame struct {
	id, event, data string
}

// feedEvent is an event's data.
type feedEvent struct {
	Cursor       string   `json:"cursor"`
	Kind         string   `json:"kind"`
	Kinds        []string `json:"kinds"`
	JobID        string   `json:"jobId"`
	DocumentID   string   `json:"documentId"`
	DocumentType string   `json:"documentType"`
	Branch       string   `json:"branch"`
	Scopes       []struct {
		Scope     string `json:"scope"`
		FromIndex int64  `json:"fromIndex"`
		ToIndex   int64  `json:"toIndex"`
	} `json:"scopes"`
	TimestampUtcMs int64             `json:"timestampUtcMs"`
	Operations     []oplog.Operation `json:"operations"`
	Reason         string            `json:"reason"`
}

func (f frame) decode(t testing.TB) feedEvent {
	t.Helper()
	var e feedEvent
	require.NoError(t, json.Unmarshal([]byte(f.data), &e), "data: %s", f.data)
	require.Equal(t, f.id, e.Cursor, "the data's cursor is the event's id")
	return e
}

// subscription is an open stream.
type subscription struct {
	t    testing.TB
	res  *http.Response
	sc   *bufio.Scanner
	stop context.CancelFunc
	odd  string // a line of no known field
}

// subscribe opens GET /v1/changes?query with header pairs and checks the
// stream's headers.
func (fs *feedServer) subscribe(query string, header ...string) *subscription {
	fs.t.Helper()
	s, res := fs.open(query, header...)
	require.Equal(fs.t, http.StatusOK, res.StatusCode)
	return s
}

// open is subscribe without checks.
func (fs *feedServer) open(query string, header ...string) (*subscription, *http.Response) {
	fs.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fs.base+readstore.ChangesPath+"?"+query, nil)
	require.NoError(fs.t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(fs.t, err)
	s := &subscription{t: fs.t, res: res, sc: bufio.NewScanner(res.Body), stop: cancel}
	s.sc.Buffer(make([]byte, 64<<10), 16<<20)
	fs.t.Cleanup(s.close)
	if res.StatusCode == http.StatusOK {
		require.Equal(fs.t, "text/event-stream", res.Header.Get("Content-Type"))
		require.Equal(fs.t, "no-cache", res.Header.Get("Cache-Control"))
		require.Equal(fs.t, "no", res.Header.Get("X-Accel-Buffering"))
	}
	return s, res
}

func (s *subscription) close() {
	s.stop()
	_, _ = io.Copy(io.Discard, s.res.Body)
	_ = s.res.Body.Close()
}

// next reads the next frame; ok is false when the stream ended. A line
// that is no field of the contract fails the test.
func (s *subscription) next() (frame, bool) {
	f, ok := s.nextFrame()
	if s.odd != "" {
		s.t.Errorf("unexpected stream line %q", s.odd)
	}
	return f, ok
}

// nextFrame is next for a goroutine: it keeps an unexpected line in odd.
func (s *subscription) nextFrame() (frame, bool) {
	var f frame
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if f.event != "" || f.data != "" {
				return f, true
			}
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "id":
			f.id = value
		case "event":
			f.event = value
		case "data":
			f.data = value
		default:
			s.odd = line
		}
	}
	return f, false
}

// events reads frames until n events arrived, skipping heartbeats; it fails
// on an end.
func (s *subscription) events(n int) []feedEvent {
	s.t.Helper()
	var out []feedEvent
	for len(out) < n {
		f, ok := s.next()
		require.True(s.t, ok, "the stream ended after %d of %d events", len(out), n)
		switch f.event {
		case "heartbeat":
			continue
		case "end":
			s.t.Fatalf("the stream ended (%s) after %d of %d events", f.data, len(out), n)
		}
		e := f.decode(s.t)
		require.Equal(s.t, f.event, e.Kind, "the event's name is its kind")
		out = append(out, e)
	}
	return out
}

// eventKey names an event by what it is, not where it is.
func eventKey(e feedEvent) string { return e.JobID + "/" + e.DocumentID }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func readAll(t testing.TB, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

// metricValue is the value of the counter or gauge series name with the
// labels (name=value pairs) in reg, 0 when it has none.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	b := &bundle{t: t.(*testing.T), reg: reg}
	return b.metric(name, labels...)
}
