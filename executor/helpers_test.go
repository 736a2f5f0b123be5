package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// bundle is one test's world: its own Postgres schema and store, its own
// topics and group on the test broker, and a registry of the built-in models.
type bundle struct {
	t        *testing.T
	url      string // the Postgres of the test, for member processes
	pool     *pgxpool.Pool
	store    oplog.Store
	kenv     *testenv.KafkaEnv
	reg      *model.Registry
	producer *kgo.Client
}

func setup(t *testing.T, partitions int32, models ...model.Model) *bundle {
	t.Helper()
	url := testenv.PostgresSchema(t)
	return setupWithURL(t, url, partitions, models...)
}

func setupWithURL(t *testing.T, url string, partitions int32, models ...model.Model) *bundle {
	t.Helper()
	return setupOn(t, url, testenv.Kafka(t), partitions, models...)
}

// setupOn is setup on the Postgres at url and the brokers of kenv.
func setupOn(t *testing.T, url string, kenv *testenv.KafkaEnv, partitions int32, models ...model.Model) *bundle {
	t.Helper()
	pool := migratedPool(t, url)
	kenv.Topics.JobsPartitions = partitions
	kenv.Topics.WriteReadyPartitions = partitions
	kenv.CreateTopics()

	reg := registry(t, models...)
	return &bundle{
		t:     t,
		url:   url,
		pool:  pool,
		store: postgres.New(pool),
		kenv:  kenv,
		reg:   reg,
		// A broker learns of a new topic a moment after its creation:
		// retry an unknown topic until the produce's deadline.
		producer: kenv.Client(kgo.ProducerLinger(0), kgo.UnknownTopicRetries(-1)),
	}
}

// registry holds the built-in models and the given ones.
func registry(t testing.TB, models ...model.Model) *model.Registry {
	t.Helper()
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	for _, m := range models {
		require.NoError(t, reg.Register(m))
	}
	return reg
}

// migratedPool opens a pool on url and migrates the operation log there.
func migratedPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = postgres.Migrate(ctx, pool)
	require.NoError(t, err)
	return pool
}

// config is a member configuration tuned for tests: short session timeouts
// and backoffs, so rebalances and retries take a moment, not minutes.
func (b *bundle) config() executor.Config {
	return executor.Config{
		Store:             b.store,
		Registry:          b.reg,
		Kafka:             b.kenv.Config,
		Topics:            b.kenv.Names,
		Group:             b.kenv.Group("executor"),
		SessionTimeout:    3 * time.Second,
		RebalanceTimeout:  5 * time.Second,
		HeartbeatInterval: 300 * time.Millisecond,
		FetchMaxWait:      200 * time.Millisecond,
		RetryBaseDelay:    10 * time.Millisecond,
		RetryMaxDelay:     300 * time.Millisecond,
		DependencyPoll:    50 * time.Millisecond,
		StoreTimeout:      5 * time.Second,
		ProduceTimeout:    10 * time.Second,
		ShutdownTimeout:   10 * time.Second,
		Logger:            zaptest.NewLogger(b.t, zaptest.Level(zap.WarnLevel)),
	}
}

// member is a running executor.
type member struct {
	e *executor.Executor
}

func (b *bundle) start(cfg executor.Config) *member {
	b.t.Helper()
	e, err := executor.New(cfg)
	require.NoError(b.t, err)
	require.NoError(b.t, e.Start(context.Background()))
	m := &member{e: e}
	b.t.Cleanup(m.stop)
	return m
}

// stop stops the member and waits for it to stop.
func (m *member) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.e.Stop(ctx); err != nil {
		panic(fmt.Sprintf("executor did not stop: %v", err))
	}
}

// wait waits for the member to stop and gives its fatal error.
func (m *member) wait(within time.Duration) error {
	select {
	case <-m.e.Done():
		return m.e.Err()
	case <-time.After(within):
		panic(fmt.Sprintf("executor did not stop within %s", within))
	}
}

// submit writes jobs to the jobs topic with a plain client, in order, and
// returns their records (with their offsets).
func (b *bundle) submit(jobs ...*record.Job) []*kgo.Record {
	b.t.Helper()
	recs := make([]*kgo.Record, len(jobs))
	for i, j := range jobs {
		r, err := record.NewJobRecord(b.kenv.Names.Jobs, j)
		require.NoError(b.t, err)
		recs[i] = r
	}
	b.produce(recs...)
	return recs
}

func (b *bundle) produce(recs ...*kgo.Record) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(b.t, b.producer.ProduceSync(ctx, recs...).FirstErr())
}

func createJob(docID, docType string) *record.Job {
	return &record.Job{JobID: uuid.NewString(), Kind: record.KindCreate, DocumentID: docID, DocumentType: docType, Actions: []oplog.Action{}}
}

func mutateJob(docID, docType string, actions ...oplog.Action) *record.Job {
	return &record.Job{JobID: uuid.NewString(), Kind: record.KindMutate, DocumentID: docID, DocumentType: docType, Actions: actions}
}

func action(scope, typ string, input any) oplog.Action {
	raw, err := json.Marshal(input)
	if err != nil {
		panic(err)
	}
	return oplog.Action{ID: uuid.NewString(), Type: typ, Scope: scope, TimestampUtcMs: time.Now().UnixMilli(), Input: raw}
}

// patchJob is a doclog/json job that merges {"seq": seq} into global.
func patchJob(docID string, seq int) *record.Job {
	return mutateJob(docID, jsondoc.DocumentType, action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"seq": seq}))
}

// waitResults polls the log until every job has a result.
func (b *bundle) waitResults(ids []string, within time.Duration) map[string]oplog.JobResult {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := map[string]oplog.JobResult{}
		var err error
		for chunk := range slices.Chunk(ids, 1000) {
			var res map[string]oplog.JobResult
			// An error (a connection a restart broke) counts as not yet.
			if res, err = b.store.JobResults(context.Background(), chunk); err != nil {
				break
			}
			for k, v := range res {
				got[k] = v
			}
		}
		if err == nil && len(got) == len(ids) {
			return got
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%d of %d jobs have a result after %s (last error: %v)", len(got), len(ids), within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// topicReader reads a topic from its start, without a group.
type topicReader struct {
	b    *bundle
	cl   *kgo.Client
	mu   sync.Mutex
	recs []*kgo.Record
}

func (b *bundle) reader(topic string) *topicReader {
	return &topicReader{b: b, cl: b.kenv.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))}
}

// until polls until done returns true for the records read so far.
func (r *topicReader) until(within time.Duration, what string, done func([]*kgo.Record) bool) []*kgo.Record {
	r.b.t.Helper()
	deadline := time.Now().Add(within)
	for !done(r.recs) {
		if time.Now().After(deadline) {
			r.b.t.Fatalf("%s: not reached within %s (%d records read)", what, within, len(r.recs))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		fs := r.cl.PollFetches(ctx)
		cancel()
		r.recs = append(r.recs, fs.Records()...)
	}
	return r.recs
}

// deadLetters reads the dead-letter topic until it holds dead letters of n
// keys, keyOf naming each ("" passes one over), and returns them by key.
func (r *topicReader) deadLetters(within time.Duration, n int, keyOf func(*record.DeadLetter) string) map[string]*record.DeadLetter {
	r.b.t.Helper()
	letters := map[string]*record.DeadLetter{}
	r.until(within, fmt.Sprintf("dead letters of %d keys", n), func(recs []*kgo.Record) bool {
		clear(letters)
		for _, rec := range recs {
			d, err := record.DecodeDeadLetter(rec)
			require.NoError(r.b.t, err)
			if k := keyOf(d); k != "" {
				letters[k] = d
			}
		}
		return len(letters) >= n
	})
	return letters
}

// writeReadies reads the write-ready topic until every job id has a record,
// and returns them by job id (re-announcements included).
func (b *bundle) writeReadies(r *topicReader, ids []string, within time.Duration) map[string][]*record.WriteReady {
	b.t.Helper()
	byJob := map[string][]*record.WriteReady{}
	n := 0
	r.until(within, "write-ready records for every job", func(recs []*kgo.Record) bool {
		for _, rec := range recs[n:] {
			wr, err := record.DecodeWriteReady(rec)
			require.NoError(b.t, err)
			byJob[wr.JobID] = append(byJob[wr.JobID], wr)
		}
		n = len(recs)
		for _, id := range ids {
			if len(byJob[id]) == 0 {
				return false
			}
		}
		return true
	})
	return byJob
}

// readAll reads a stream completely.
func (b *bundle) readAll(k oplog.StreamKey) []oplog.Operation {
	b.t.Helper()
	ops, err := b.store.ReadStream(context.Background(), k, 0, 0)
	require.NoError(b.t, err)
	return ops
}

// checkDocument asserts the log invariants of one document: every stream's
// indexes contiguous from 0, hashes reproduced by a replay, and the global
// stream's operations in the order of wantJobs (one operation per job).
func (b *bundle) checkDocument(docID, docType string, wantJobs []string) {
	b.t.Helper()
	for _, scope := range []string{oplog.ScopeDocument, oplog.ScopeGlobal} {
		k := oplog.StreamKey{DocumentID: docID, Scope: scope, Branch: oplog.DefaultBranch}
		ops := b.readAll(k)
		for i, op := range ops {
			require.EqualValues(b.t, i, op.Index, "%s: index %d holds operation %d", k, i, op.Index)
			// Every job of these tests writes one operation, its 0th.
			require.Equal(b.t, model.OpID(op.JobID, 0), op.OpID)
		}
		_, err := b.reg.ReplayStream(k, docType, ops)
		require.NoError(b.t, err, "replay %s", k)
		if scope == oplog.ScopeGlobal {
			got := make([]string, len(ops))
			for i, op := range ops {
				got[i] = op.JobID
			}
			require.Equal(b.t, wantJobs, got, "%s: operations not in submission order, or gaps or duplicates", k)
		}
	}
}

func ids(jobs []*record.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.JobID
	}
	return out
}

func docName(i int) string { return fmt.Sprintf("doc-%03d", i) }

// requireAllApplied waits for every job to end WRITE_READY and checks each
// of the docs documents' streams against the jobs submitted to it.
func (b *bundle) requireAllApplied(all []*record.Job, perDocJobs map[string][]string, docs int, within time.Duration) {
	b.t.Helper()
	results := b.waitResults(ids(all), within)
	for _, j := range all {
		require.Equal(b.t, oplog.JobWriteReady, results[j.JobID].Status, "job %s: %+v", j.JobID, results[j.JobID].ErrorHistory)
	}
	for i := range docs {
		b.checkDocument(docName(i), jsondoc.DocumentType, perDocJobs[docName(i)])
	}
}

// requireNoDeadLetters checks that the dead-letter topic is empty.
func (b *bundle) requireNoDeadLetters() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := b.kenv.Admin().ListEndOffsets(ctx, b.kenv.Names.DeadLetters)
	require.NoError(b.t, err)
	ends.Each(func(o kadm.ListedOffset) {
		require.Zero(b.t, o.Offset, "nothing was dead-lettered")
	})
}
