// Package projtest is the projectors' test harness: an isolated Postgres
// schema with the log and runner migrated, a write-ready topic of its own, a
// workload that reduces jobs with the executor's own code (executor/reduce:
// every hash is genuine, and every write-ready record is built as the
// executor builds it) and appends them to the log, and a replay of the log
// to compare projections with.
package projtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/doclog/doclog/executor/place"
	"github.com/doclog/doclog/executor/reduce"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/pgproj"
	"github.com/doclog/doclog/record"
)

// Env is one test's services.
type Env struct {
	T        testing.TB
	Pool     *pgxpool.Pool
	Log      *postgres.Store
	Store    *pgproj.Store
	Registry *model.Registry
	Kafka    *testenv.KafkaEnv
	Topic    string
	producer *kgo.Client
}

// New migrates a fresh schema (log and runner; a projector's own set with
// migrate) and creates the test's topics (4 write-ready partitions).
func New(t testing.TB, sets ...pgmigrate.Set) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresSchema(t))
	require.NoError(t, err)
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pgmigrate.Migrate(ctx, pool, append([]pgmigrate.Set{postgres.Migrations(), pgproj.RunnerMigrations()}, sets...)...)
	require.NoError(t, err)
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	k := testenv.Kafka(t)
	names := k.CreateTopics()
	return &Env{
		T: t, Pool: pool, Log: postgres.New(pool), Store: pgproj.New(pool), Registry: reg,
		Kafka: k, Topic: names.WriteReady, producer: k.Client(kgo.DefaultProduceTopic(names.WriteReady),
			// A KRaft broker learns of a new topic a moment after creating
			// it; Publish's deadline bounds the wait instead.
			kgo.UnknownTopicRetries(-1)),
	}
}

// Logger is a no-op logger, or a development logger on stderr when
// PROJTEST_LOG is set (for debugging a test).
func Logger() *zap.Logger {
	if os.Getenv("PROJTEST_LOG") != "" {
		l, _ := zap.NewDevelopment()
		return l
	}
	return zap.NewNop()
}

// Config is a runner configuration for the test: its topic, a group of its
// own per name, no periodic reconciler (tests call Reconcile), and short
// session timeouts so a closed member's partitions move quickly.
func (e *Env) Config(p projectors.Projector, group string) projectors.Config {
	return projectors.Config{
		Projector: p, Store: e.Store, Log: e.Log, Registry: e.Registry,
		Kafka: e.Kafka.Config, Topic: e.Topic, Group: e.Kafka.Group(group),
		ReconcileInterval: -1, RetryBaseDelay: 20 * time.Millisecond, RetryMaxDelay: 500 * time.Millisecond,
		Logger: Logger(),
		KafkaOptions: []kgo.Opt{
			kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
			kgo.FetchMaxWait(200 * time.Millisecond),
		},
	}
}

// Start creates and starts a runner, stopped when the test ends.
func (e *Env) Start(cfg projectors.Config) *projectors.Runner {
	e.T.Helper()
	r, err := projectors.New(cfg)
	require.NoError(e.T, err)
	require.NoError(e.T, r.Start(context.Background()))
	e.T.Cleanup(func() { require.NoError(e.T, r.Stop(context.Background())) })
	return r
}

// Publish produces write-ready records for the jobs, in order.
func (e *Env) Publish(jobs ...*record.WriteReady) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, len(jobs))
	for i, w := range jobs {
		rec, err := record.NewWriteReadyRecord(e.Topic, w, 0)
		require.NoError(e.T, err)
		recs[i] = rec
	}
	require.NoError(e.T, e.producer.ProduceSync(ctx, recs...).FirstErr())
}

// Eventually waits for cond with a deadline, polling.
func (e *Env) Eventually(cond func() bool, timeout time.Duration, msg string) {
	e.T.Helper()
	require.Eventually(e.T, cond, timeout, 25*time.Millisecond, msg)
}

// Doc is a document of the workload and its state as the log has it.
type Doc struct {
	ID   string
	Type string
	// Branch is the branch its streams are on ("" is main).
	Branch  string
	States  map[string]*model.StreamState
	Deleted bool
	nodes   int
}

// Workload appends jobs to the log and returns their write-ready records.
type Workload struct {
	env   *Env
	rng   *rand.Rand
	Docs  []*Doc
	clock int64
	seq   int
}

// NewWorkload starts a workload with a seeded generator.
func (e *Env) NewWorkload(seed uint64) *Workload {
	return &Workload{env: e, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), clock: 1_700_000_000_000}
}

// Action builds an action with a fresh id and timestamp.
func (w *Workload) Action(scope, typ string, input any) oplog.Action {
	b, err := json.Marshal(input)
	require.NoError(w.env.T, err)
	w.seq++
	w.clock += 1000
	return oplog.Action{ID: fmt.Sprintf("act-%d", w.seq), Type: typ, Scope: scope, TimestampUtcMs: w.clock, Input: b}
}

// Create adds a document with a CREATE_DOCUMENT job.
func (w *Workload) Create(id, docType, slug string) (*Doc, *record.WriteReady) {
	w.env.T.Helper()
	return w.CreateOn(id, "", docType, slug)
}

// CreateOn is Create on a branch ("" is main).
func (w *Workload) CreateOn(id, branch, docType, slug string) (*Doc, *record.WriteReady) {
	w.env.T.Helper()
	d := &Doc{ID: id, Type: docType, Branch: branch, States: map[string]*model.StreamState{}}
	rec, err := w.Job(d, w.Action(oplog.ScopeDocument, model.ActionCreateDocument,
		model.CreateDocumentInput{DocumentType: docType, Name: "doc " + id, Slug: slug}))
	require.NoError(w.env.T, err)
	w.Docs = append(w.Docs, d)
	return d, rec
}

func (d *Doc) stream(scope string) *model.StreamState {
	st, ok := d.States[scope]
	if !ok {
		st = model.NewStreamState(oplog.StreamKey{DocumentID: d.ID, Scope: scope, Branch: d.branch()}, d.Type)
	}
	return st
}

func (d *Doc) branch() string {
	if d.Branch == "" {
		return oplog.DefaultBranch
	}
	return d.Branch
}

// Job reduces the actions as one job of the document with the executor's
// reduce (all or nothing), appends its request to the log and returns the
// job's write-ready record, built by the executor's announcer code from the
// operations reduce built. A refused action returns its error; nothing is
// written then.
func (w *Workload) Job(d *Doc, actions ...oplog.Action) (*record.WriteReady, error) {
	return w.JobWith(d, nil, actions...)
}

// noKeyframes keeps the harness's log free of keyframes, as it has always
// been, so a test that tampers with an operation meets only the operation.
const noKeyframes = math.MaxInt64

// JobWith is Job with a hook that may change the operations reduce built
// before they are appended and announced (a wrong hash, say).
func (w *Workload) JobWith(d *Doc, tamper func([]oplog.Operation), actions ...oplog.Action) (*record.WriteReady, error) {
	w.env.T.Helper()
	return w.run(d, &record.Job{JobID: uuid.NewString(), Kind: record.KindMutate, DocumentID: d.ID,
		DocumentType: d.Type, Branch: d.Branch, Actions: actions}, scopesOf(actions), tamper)
}

// Load runs a load job of the operations (another replica's, as it stored
// them) like Job: placed by timestamp by the executor's reduce on the
// streams as the log holds them, appended, and announced; a load of
// replays only writes nothing and returns no record.
func (w *Workload) Load(d *Doc, ops ...record.LoadOperation) (*record.WriteReady, error) {
	w.env.T.Helper()
	actions := make([]oplog.Action, len(ops))
	for i := range ops {
		actions[i] = ops[i].Action
	}
	return w.run(d, &record.Job{JobID: uuid.NewString(), Kind: record.KindLoad, DocumentID: d.ID,
		DocumentType: d.Type, Branch: d.Branch, Actions: []oplog.Action{}, Operations: ops}, scopesOf(actions), nil)
}

func (w *Workload) run(d *Doc, j *record.Job, scopes []string, tamper func([]oplog.Operation)) (*record.WriteReady, error) {
	t := w.env.T
	t.Helper()
	job := reduce.Job{Job: j}
	doc := &reduce.Document{ID: d.ID, Jobs: []reduce.Job{job}, Heads: map[oplog.StreamKey]*model.StreamState{}}
	for _, scope := range append([]string{oplog.ScopeDocument}, scopes...) {
		k := oplog.StreamKey{DocumentID: d.ID, Scope: scope, Branch: d.branch()}
		if _, ok := doc.Heads[k]; !ok {
			doc.Streams = append(doc.Streams, k)
			doc.Heads[k] = d.stream(scope)
		}
	}
	r := reduce.Reducer{Registry: w.env.Registry, KeyframeInterval: noKeyframes}
	for _, k := range r.NeedsStored(d.ID, j) {
		if doc.Heads[k].Revision == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ops, err := w.env.Log.ReadStream(ctx, k, 0, int(doc.Heads[k].Revision))
		cancel()
		require.NoError(t, err)
		if doc.Stored == nil {
			doc.Stored = map[oplog.StreamKey]*place.Stored{}
		}
		whole := place.Whole(ops)
		doc.Stored[k] = &whole
	}
	res := r.Reduce(doc, nil)
	switch v := res.Verdicts[0]; v.Kind {
	case reduce.Applied:
	case reduce.Failed:
		return nil, v.Err
	default:
		return nil, fmt.Errorf("job %s was not applied (verdict %d): %v", job.JobID, v.Kind, v.Err)
	}
	ops := res.Verdicts[0].Ops
	if tamper != nil {
		tamper(ops)
		byID := make(map[string]oplog.Operation, len(ops))
		for _, op := range ops {
			byID[op.OpID] = op
		}
		for _, sa := range res.Request.Streams {
			for i := range sa.Operations {
				sa.Operations[i] = byID[sa.Operations[i].OpID]
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := w.env.Log.Append(ctx, []oplog.AppendRequest{*res.Request})
	require.NoError(t, err)
	require.NoError(t, out[0].Err, "append job %s to %s", job.JobID, d.ID)
	require.Len(t, out[0].Jobs, 1)
	for k, st := range res.Heads {
		d.States[k.Scope] = st
	}
	if len(ops) == 0 {
		return nil, nil // a load of replays only: nothing is announced
	}
	wr, err := reduce.WriteReady(job.Job, out[0].Jobs[0], reduce.Stored(ops, &out[0]), time.Now())
	require.NoError(t, err)
	if info, ok := model.DocumentInfoOf(d.States[oplog.ScopeDocument]); ok {
		d.Deleted = info.IsDeleted
	}
	return wr, nil
}

// scopesOf lists the actions' scopes in first-use order.
func scopesOf(actions []oplog.Action) []string {
	var scopes []string
	for _, a := range actions {
		if !slices.Contains(scopes, a.Scope) {
			scopes = append(scopes, a.Scope)
		}
	}
	return scopes
}

// Random runs a random workload: n documents of doclog/drive and
// doclog/json, then jobs random mutations (model actions, names, slugs,
// relationships between the documents, a few deletions). It returns every
// job's record in commit order, fewer jobs when every document got deleted.
func (w *Workload) Random(prefix string, n, jobs int) []*record.WriteReady {
	w.env.T.Helper()
	return w.RandomOn(prefix, "", n, jobs)
}

// RandomOn is Random on a branch ("" is main): the same document ids on
// two branches are two sets of streams.
func (w *Workload) RandomOn(prefix, branch string, n, jobs int) []*record.WriteReady {
	w.env.T.Helper()
	var out []*record.WriteReady
	for i := range n {
		typ := jsondoc.DocumentType
		if i%3 == 0 {
			typ = drive.DocumentType
		}
		id := fmt.Sprintf("%s-%04d", prefix, i)
		_, rec := w.CreateOn(id, branch, typ, fmt.Sprintf("%s-slug-%d", prefix, i))
		out = append(out, rec)
	}
	docs := w.Docs[len(w.Docs)-n:]
	for len(out) < n+jobs {
		d := docs[w.rng.IntN(len(docs))]
		if d.Deleted {
			if !slices.ContainsFunc(docs, func(d *Doc) bool { return !d.Deleted }) {
				break // every document is deleted: nothing can change any more
			}
			continue
		}
		rec, err := w.Job(d, w.randomActions(d, docs)...)
		if err != nil {
			continue // a refused action (a relationship that exists): pick again
		}
		out = append(out, rec)
	}
	return out
}

func (w *Workload) randomActions(d *Doc, docs []*Doc) []oplog.Action {
	other := docs[w.rng.IntN(len(docs))].ID
	switch r := w.rng.IntN(100); {
	case r < 3:
		return []oplog.Action{w.Action(oplog.ScopeDocument, model.ActionDeleteDocument, struct{}{})}
	case r < 10:
		return []oplog.Action{w.Action(oplog.ScopeDocument, model.ActionSetName, model.SetNameInput{Name: fmt.Sprintf("name %d", w.seq)})}
	case r < 15:
		return []oplog.Action{w.Action(oplog.ScopeDocument, model.ActionSetSlug, model.SetSlugInput{Slug: fmt.Sprintf("%s-s%d", d.ID, w.seq)})}
	case r < 25:
		return []oplog.Action{w.Action(oplog.ScopeDocument, model.ActionAddRelationship, model.RelationshipInput{TargetID: other, Type: "ref"})}
	case r < 32:
		info, _ := model.DocumentInfoOf(d.stream(oplog.ScopeDocument))
		if len(info.Relationships) == 0 {
			return w.randomActions(d, docs)
		}
		rel := info.Relationships[w.rng.IntN(len(info.Relationships))]
		return []oplog.Action{w.Action(oplog.ScopeDocument, model.ActionRemoveRelationship, model.RelationshipInput{TargetID: rel.TargetID, Type: rel.Type})}
	}
	if d.Type == drive.DocumentType {
		d.nodes++
		if w.rng.IntN(2) == 0 {
			return []oplog.Action{w.Action(oplog.ScopeGlobal, drive.ActionAddFolder, drive.AddFolderInput{ID: fmt.Sprintf("n%d", d.nodes), Name: "folder"})}
		}
		w.seq++
		w.clock += 1000
		acts, err := drive.AddFileActions(fmt.Sprintf("act-%d", w.seq), w.clock, drive.AddFileInput{
			ID: fmt.Sprintf("n%d", d.nodes), Name: "file", DocumentID: other,
		})
		require.NoError(w.env.T, err)
		return acts
	}
	scope := oplog.ScopeGlobal
	if w.rng.IntN(4) == 0 {
		scope = oplog.ScopeLocal
	}
	return []oplog.Action{w.Action(scope, jsondoc.ActionMergePatch, map[string]any{fmt.Sprintf("k%d", w.rng.IntN(8)): w.rng.IntN(1000)})}
}

// Replay rebuilds every stream of every document in the log and returns
// them: what each projection must equal once caught up. A stream whose
// replay fails (a tampered hash) is in the second map with its error.
func (e *Env) Replay() (map[oplog.StreamKey]*model.StreamState, map[oplog.StreamKey]error) {
	t := e.T
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[oplog.StreamKey]*model.StreamState{}
	failed := map[oplog.StreamKey]error{}
	cursor := ""
	for {
		page, err := e.Log.ListDocuments(ctx, cursor, 500)
		require.NoError(t, err)
		// Every scope on every branch of the page's documents.
		heads, err := e.Log.Heads(ctx, page.DocumentIDs)
		require.NoError(t, err)
		for k, rev := range heads {
			if rev == 0 {
				continue
			}
			ops, err := e.Log.ReadStream(ctx, k, 0, 0)
			require.NoError(t, err)
			st, err := e.Registry.ReplayStream(k, ops[0].DocumentType, ops)
			if err != nil {
				failed[k] = err
				continue
			}
			out[k] = st
		}
		if page.Next == "" || len(page.DocumentIDs) == 0 {
			return out, failed
		}
		cursor = page.Next
	}
}
