package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/doclog/doclog/admin/bench/pgprobe"
	"github.com/doclog/doclog/internal/connflags"
	"github.com/doclog/doclog/internal/redact"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors/docview"
)

// job is one submitted job and, once known, the little of its result the
// report needs. A run may hold millions (an hour's soak at a quiet
// machine's half peak is about sixteen), in the same process as the
// embedded roles whose memory and CPU it reports: the struct holds no
// pointer, so the garbage collector never scans the slices of them, and
// it is a quarter of the size a string id and time.Time fields made it.
type job struct {
	id         uuid.UUID
	submitted  int64 // Unix nanoseconds
	writeReady int64 // the result's created_at, Unix nanoseconds
	index      int64 // the token's index on the document's global stream, -1 if none
	doc, ops   int32
	state      jobState
}

// jobState is how far a job's result is known.
type jobState uint8

const (
	jobPending jobState = iota // no result yet
	jobWritten                 // WRITE_READY (or further)
	jobFailed
)

// newJob is job id of document doc, carrying ops operations, submitted at
// at. Job ids are UUIDs, whoever assigns them (ingest, or this package for
// jobs produced straight to Kafka).
func newJob(id string, doc, ops int, at time.Time) (job, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return job{}, fmt.Errorf("job id %q is not a UUID: %w", id, err)
	}
	return job{id: u, doc: int32(doc), ops: int32(ops), submitted: at.UnixNano(), index: -1}, nil
}

func (j *job) submittedAt() time.Time  { return time.Unix(0, j.submitted) }
func (j *job) writeReadyAt() time.Time { return time.Unix(0, j.writeReady) }

// known records the job's result.
func (j *job) known(res oplog.JobResult, stream oplog.StreamKey) {
	j.state = jobWritten
	if res.Status == oplog.JobFailed {
		j.state = jobFailed
	}
	j.writeReady, j.index = res.CreatedAt.UnixNano(), tokenIndex(res, stream)
}

// runner is one run: the documents, the jobs submitted, and the probes.
type runner struct {
	cfg   Config
	store *postgres.Store // the benchmark's own pool, for its probes
	emb   *embedded
	sub   submitter
	view  *docview.View

	docs    []string
	streams []oplog.StreamKey // the global stream of each document
	jobs    [][]job           // per document, in submission order
	fails   atomic.Int64      // submissions that were not acknowledged
	// refusals counts the submissions answered 429 (backpressure) and
	// refusedFor the Retry-After they waited, in nanoseconds.
	refusals, refusedFor atomic.Int64
	lastErr              atomic.Value // the last submission error, for the report

	// schema is the embedded run's own schema, dropped by close through
	// baseURL (the URL given, without the schema on its search path).
	schema, baseURL string

	// probes counts the statements the benchmark itself sends to Postgres
	// during the measured phase (each its own transaction), subtracted
	// from the database's counters.
	probes atomic.Int64
	samp   *sampler
	ser    *series // nil without Config.Series
}

func newRunner(ctx context.Context, cfg Config) (_ *runner, err error) {
	r := &runner{cfg: cfg}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.close())
		}
	}()
	id := uuid.NewString()[:8]
	if cfg.Embedded {
		// The embedded roles get a schema of their own: in the database's
		// own schema their projectors would share the checkpoint rows of
		// any doclog already using it (they are keyed by projector name and
		// partition), fencing that doclog's projectors and moving its
		// positions to the benchmark topics' offsets. A fresh schema also
		// starts every run from empty tables.
		r.schema, r.baseURL = "doclog_bench_"+id, cfg.DatabaseURL
		if err = pgprobe.CreateSchema(ctx, r.baseURL, cfg.DatabaseConnectTimeout, r.schema); err != nil {
			r.schema = ""
			return nil, err
		}
		if cfg.DatabaseURL, err = withSearchPath(cfg.DatabaseURL, r.schema); err != nil {
			return nil, err
		}
		r.cfg = cfg
	}
	if r.store, err = connflags.OpenLog(ctx, withPoolSize(cfg.DatabaseURL, 4), cfg.DatabaseConnectTimeout); err != nil {
		return nil, err
	}
	r.view = docview.NewView(r.store.Pool(), nil)
	ingestURL, jobsTopic := cfg.IngestURL, kafka.TopicNames(cfg.TopicPrefix).Jobs
	if cfg.Embedded {
		if r.emb, err = startEmbedded(ctx, cfg, id); err != nil {
			return nil, err
		}
		ingestURL, jobsTopic = r.emb.ingestURL(), r.emb.names.Jobs
	}
	if cfg.Via == ViaKafka {
		if r.sub, err = newKafkaSubmitter(cfg.Kafka, jobsTopic); err != nil {
			return nil, err
		}
	} else {
		h := newHTTPSubmitter(ingestURL, cfg.AuthToken, cfg.Documents)
		r.sub = h
		if cfg.Coalesce > 0 {
			if r.sub, err = newBatcherSubmitter(h, cfg.Coalesce); err != nil {
				h.close()
				return nil, err
			}
		}
	}
	r.docs = make([]string, cfg.Documents)
	r.streams = make([]oplog.StreamKey, cfg.Documents)
	r.jobs = make([][]job, cfg.Documents)
	for i := range r.docs {
		r.docs[i] = uuid.Must(uuid.NewV7()).String()
		r.streams[i] = oplog.StreamKey{DocumentID: r.docs[i], Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	}
	return r, nil
}

// close stops what newRunner started; its error is the failure to drop the
// embedded run's schema, which is left behind then.
func (r *runner) close() error {
	if r.sub != nil {
		r.sub.close()
	}
	if r.emb != nil {
		r.emb.stop()
	}
	if r.store != nil {
		r.store.Close()
	}
	if r.schema == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pgprobe.DropSchema(ctx, r.baseURL, r.cfg.DatabaseConnectTimeout, r.schema); err != nil {
		return fmt.Errorf("the benchmark's schema %s is left behind (drop it by hand): %w", r.schema, err)
	}
	return nil
}

func (r *runner) progress(p Progress) {
	if r.cfg.Progress != nil {
		p.Total, p.Jobs = r.cfg.Duration, r.cfg.fixedJobs()
		r.cfg.Progress(p)
	}
}

func (r *runner) run(ctx context.Context) (*Report, error) {
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	cpuGroups := r.cpuGroups(ctx)
	before, err := pgprobe.Snapshot(ctx, r.store.Pool())
	if err != nil {
		return nil, err
	}
	r.probes.Add(before.Probes)

	r.samp = newSampler(len(r.docs))
	sctx, stopSampler := context.WithCancel(ctx)
	var sw sync.WaitGroup
	sw.Go(func() { r.sample(sctx) })

	if r.cfg.CPUProfile != nil {
		if err := pprof.StartCPUProfile(r.cfg.CPUProfile); err != nil {
			stopSampler()
			sw.Wait()
			return nil, fmt.Errorf("starting the CPU profile: %w", err)
		}
	}
	cpuBefore := snapshotCPU(cpuGroups)
	start := time.Now()
	stopSeries := r.startSeries(ctx, start, cpuGroups)
	loadDone := r.load(ctx, start)
	if err := stopSeries(); err != nil {
		stopSampler()
		sw.Wait()
		return nil, err
	}
	drained, err := r.drain(ctx, start)
	cpuAfter, wall := snapshotCPU(cpuGroups), time.Since(start)
	if r.cfg.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	stopSampler()
	sw.Wait()
	if err != nil {
		return nil, err
	}

	rep := &Report{}
	r.fill(rep, start, loadDone, drained)
	rep.CPU = cpuReport(cpuGroups, cpuBefore, cpuAfter, wall.Seconds(), rep.Submitted.Operations)
	r.progress(Progress{Phase: "legs", Elapsed: r.cfg.Duration, Submitted: rep.Submitted.Jobs,
		WriteReady: rep.WriteReady.Jobs, ReadReady: rep.ReadReady.Jobs})
	topics := kafka.TopicNames(r.cfg.TopicPrefix)
	if r.emb != nil {
		topics = r.emb.names // before stop deletes them
	}
	if len(r.cfg.Kafka.Seeds) == 0 {
		rep.LegsError = "the record timestamps need --kafka-seeds"
	} else if rep.Legs, err = r.legs(ctx, topics); err != nil {
		rep.LegsError = err.Error()
	}
	// The roles' sessions end with their pool, which makes them report
	// their counters; the benchmark's own idle sessions report within a
	// second.
	var rss []ProcessRSS
	if r.emb != nil {
		rss = embeddedRSS()
		r.emb.stop()
	} else {
		rss = doclogRSS()
	}
	rep.PeakRSS = rss
	r.progress(Progress{Phase: "statistics", Elapsed: r.cfg.Duration, Submitted: rep.Submitted.Jobs,
		WriteReady: rep.WriteReady.Jobs, ReadReady: rep.ReadReady.Jobs})
	if err := sleep(ctx, 1500*time.Millisecond); err != nil {
		return nil, err
	}
	after, err := pgprobe.Snapshot(ctx, r.store.Pool())
	if err != nil {
		return nil, err
	}
	rep.Postgres = postgresReport(after.Sub(before), r.probes.Load(), rep.Submitted.Operations)

	if r.cfg.Baseline {
		r.progress(Progress{Phase: "baseline", Elapsed: r.cfg.Duration, Submitted: rep.Submitted.Jobs,
			WriteReady: rep.WriteReady.Jobs, ReadReady: rep.ReadReady.Jobs})
		res, err := pgprobe.CopyBaseline(ctx, r.store.Pool(), r.docs, r.cfg.BaselineChunk)
		if err != nil {
			return nil, err
		}
		rep.Baseline = baselineReport(res, r.cfg.BaselineChunk, rep)
	}
	r.progress(Progress{Phase: "done", Elapsed: r.cfg.Duration, Submitted: rep.Submitted.Jobs,
		WriteReady: rep.WriteReady.Jobs, ReadReady: rep.ReadReady.Jobs})
	return rep, nil
}

// cpuGroups finds the processes whose CPU the run accounts (CPU). The
// Postgres server is found through a backend of the benchmark's own pool;
// without it the report leaves Postgres out.
func (r *runner) cpuGroups(ctx context.Context) []cpuGroup {
	self := "doclogctl bench (load generator)"
	if r.emb != nil {
		self = "doclogctl bench --embedded (every role and the load generator)"
	}
	pid, err := pgprobe.BackendPID(ctx, r.store.Pool())
	if err != nil {
		r.cfg.Logger.Warn("the Postgres server's CPU is left out", zap.Error(err))
	}
	// Embedded, the roles are this process and no doclog process is the
	// run's.
	return cpuGroups(self, r.emb == nil, r.cfg.TopicPrefix, pid, r.cfg.Kafka.Seeds)
}

// setup creates the documents and waits until the document view has them,
// so the measured phase starts with an idle pipeline.
func (r *runner) setup(ctx context.Context) error {
	r.progress(Progress{Phase: "setup", WriteReady: -1, ReadReady: -1})
	ids := make([]string, len(r.docs))
	errs := make([]error, len(r.docs))
	var wg sync.WaitGroup
	for i, doc := range r.docs {
		wg.Go(func() { ids[i], errs[i] = admitted(ctx, func() (string, error) { return r.sub.create(ctx, doc) }) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("creating the benchmark's documents: %w", err)
	}
	grown, err := r.grow(ctx)
	if err != nil {
		return err
	}
	ids = append(ids, grown...)
	docScopes := make([]oplog.StreamKey, len(r.docs))
	for i, doc := range r.docs {
		docScopes[i] = oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}
	}
	// W2's documents are ready once the view holds their last fill.
	ready := func(applied map[oplog.StreamKey]int64) bool {
		return !slices.ContainsFunc(docScopes, func(k oplog.StreamKey) bool { return applied[k] < 0 }) &&
			!slices.ContainsFunc(r.streams, func(k oplog.StreamKey) bool { return applied[k] < int64(r.cfg.fillJobs())-1 })
	}
	deadline := time.Now().Add(r.cfg.Drain)
	for {
		if err := r.roleFailure(); err != nil {
			return err
		}
		found, err := r.store.JobResults(ctx, ids)
		if err != nil {
			return err
		}
		for _, res := range found {
			if res.Status == oplog.JobFailed {
				return fmt.Errorf("creating document %s failed: %v", res.DocumentID, res.ErrorHistory)
			}
		}
		applied, err := r.view.AppliedIndexes(ctx, append(slices.Clone(docScopes), r.streams...))
		if err != nil {
			return err
		}
		if len(found) == len(ids) && ready(applied) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %d documents were not created within %s (%d job results): is the executor running?",
				len(ids), r.cfg.Drain, len(found))
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	// Let the roles' sessions report the setup's counters before the
	// measured phase begins (backends report when idle, within a second).
	return sleep(ctx, 1200*time.Millisecond)
}

func (r *runner) roleFailure() error {
	if r.emb == nil {
		return nil
	}
	return r.emb.err()
}

// inputs returns the merge patches of a document's n-th job: one in mode
// single (cycling over K keys), K in mode batch. Merge patches over K keys
// keep the document's state the same size however long the run.
func (r *runner) inputs(n int) []json.RawMessage {
	k := r.cfg.ActionsPerDocument
	if r.cfg.Mode == ModeSingle {
		if r.cfg.StateBytes > 0 {
			return []json.RawMessage{r.editRecord(n, 0)}
		}
		return []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"k%d":%d}`, n%k, n/k))}
	}
	out := make([]json.RawMessage, k)
	for i := range out {
		if r.cfg.StateBytes > 0 {
			out[i] = r.editRecord(n, i)
			continue
		}
		out[i] = json.RawMessage(fmt.Sprintf(`{"k%d":%d}`, i, n))
	}
	return out
}

// submit sends one job of document d and records it as submitted at t.
func (r *runner) submit(ctx context.Context, d, n int, t time.Time) bool {
	in := r.inputs(n)
	id, err := r.sub.mutate(ctx, r.docs[d], in)
	for r.waitedOut(ctx, err) {
		if r.cfg.Rate == 0 {
			t = time.Now() // the closed loop measures from the accepted submission
		}
		id, err = r.sub.mutate(ctx, r.docs[d], in)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.fails.Add(1)
			r.lastErr.Store(err.Error())
			_ = sleep(ctx, 50*time.Millisecond) // do not spin on a refusing API
		}
		return false
	}
	return r.record(id, d, len(in), t)
}

// record keeps job id of document d, acknowledged, as submitted at t; an
// id that is not a UUID counts as a failed submission.
func (r *runner) record(id string, d, ops int, t time.Time) bool {
	j, err := newJob(id, d, ops, t)
	if err != nil {
		r.fails.Add(1)
		r.lastErr.Store(err.Error())
		return false
	}
	r.jobs[d] = append(r.jobs[d], j)
	if r.ser != nil {
		r.ser.add(j)
	}
	return true
}

// maxAttempts bounds the attempts at one job of a fixed workload (about a
// minute of refusals): an API that refuses that long is not coming back.
const maxAttempts = 1200

// submitJob is submit, retried while refused when the workload is fixed:
// a fixed workload submits every one of its jobs, and ingest refuses with
// 429 while the executors lag behind. A timed run moves on instead.
func (r *runner) submitJob(ctx context.Context, d, n int, t time.Time) {
	for range maxAttempts {
		if r.submit(ctx, d, n, t) || r.cfg.fixedJobs() == 0 || ctx.Err() != nil {
			return
		}
	}
}

// waitedOut reports whether err is ingest's backpressure (a 429), after
// counting it and waiting its Retry-After (or until ctx ends): the caller
// sends the same job again. In a closed loop that is what paces the load to
// the rate the pipeline sustains.
func (r *runner) waitedOut(ctx context.Context, err error) bool {
	var ref *refusal
	if !errors.As(err, &ref) || ctx.Err() != nil {
		return false
	}
	r.refusals.Add(1)
	r.refusedFor.Add(int64(ref.retryAfter))
	return sleep(ctx, ref.retryAfter) == nil
}

// admitted sends a job of the set-up (a creation, a fill) until ingest
// admits it, waiting out each 429 for its advised time without counting
// it: the set-up is not measured, and a refusal of it is not a failure.
func admitted(ctx context.Context, send func() (string, error)) (string, error) {
	for {
		id, err := send()
		var ref *refusal
		if !errors.As(err, &ref) || ctx.Err() != nil {
			return id, err
		}
		if err := sleep(ctx, ref.retryAfter); err != nil {
			return "", err
		}
	}
}

// startSeries starts the time series, if configured, and returns what
// stops it at the end of the load.
func (r *runner) startSeries(ctx context.Context, start time.Time, groups []cpuGroup) (stop func() error) {
	if r.cfg.Series == nil {
		return func() error { return nil }
	}
	prefix := r.cfg.TopicPrefix
	if r.emb != nil {
		prefix = strings.TrimSuffix(r.emb.names.Jobs, kafka.JobsTopic)
	}
	r.ser = newSeries(r, prefix, groups)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.ser.run(sctx, start) }()
	return func() error {
		cancel()
		return <-done
	}
}

// load submits for the configured duration (or the fixed workload) and returns when the last
// submission was acknowledged.
func (r *runner) load(ctx context.Context, start time.Time) time.Time {
	end := start.Add(r.cfg.Duration)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var submitted atomic.Int64
	if r.cfg.JobsPerRequest > 1 {
		r.startBatched(lctx, &wg, &submitted, start, end)
	} else if r.cfg.Rate == 0 {
		for d := range r.docs {
			wg.Go(func() {
				limit := r.cfg.jobsOf(d)
				for n := 0; (limit < 0 && time.Now().Before(end) || n < limit) && lctx.Err() == nil; n++ {
					r.submitJob(lctx, d, n, time.Now())
					submitted.Add(1)
				}
			})
		}
	} else {
		// Open loop: job i is due at start + i×interval and goes to
		// document i mod D, whose worker submits its jobs in order. A job
		// counts from when it was due, not from when its worker got to it.
		interval := time.Duration(float64(time.Second) * float64(r.cfg.opsPerJob()) / r.cfg.Rate)
		queues := make([]chan time.Time, len(r.docs))
		for d := range queues {
			queues[d] = make(chan time.Time, 4096)
			wg.Go(func() {
				n := 0
				for due := range queues[d] {
					r.submitJob(lctx, d, n, due)
					submitted.Add(1)
					n++
				}
			})
		}
		wg.Go(func() {
			defer func() {
				for _, q := range queues {
					close(q)
				}
			}()
			r.schedule(lctx, start, end, interval, func(d int, due time.Time) { queues[d] <- due })
		})
	}
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return time.Now()
		case <-ticker.C:
			if err := r.roleFailure(); err != nil {
				r.cfg.Logger.Error("a role failed; stopping the load", zap.Error(err))
				r.lastErr.Store(err.Error())
				cancel()
			}
			elapsed := time.Since(start)
			if r.cfg.Duration > 0 {
				elapsed = min(elapsed, r.cfg.Duration)
			}
			r.progress(Progress{Phase: "submit", Elapsed: elapsed,
				Submitted: int(submitted.Load()), WriteReady: -1, ReadReady: -1})
		}
	}
}

// schedule is the open loop's clock: job i falls due at start +
// i×interval and goes to document i mod D (enqueue), until end or the
// fixed workload's last job.
func (r *runner) schedule(ctx context.Context, start, end time.Time, interval time.Duration, enqueue func(d int, due time.Time)) {
	total := r.cfg.fixedJobs()
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		over := !due.Before(end)
		if total > 0 {
			over = i >= total
		}
		if over || sleepUntil(ctx, due) != nil {
			return
		}
		enqueue(i%len(r.docs), due)
	}
}

// drain looks up the results of the submitted jobs until every one has
// reached READ_READY (or failed) or the drain time is up, and reports
// which.
func (r *runner) drain(ctx context.Context, start time.Time) (bool, error) {
	var pending []*job
	for d := range r.jobs {
		for i := range r.jobs[d] {
			pending = append(pending, &r.jobs[d][i])
		}
	}
	total := len(pending)
	ids := make([]string, 0, lookupChunk)
	deadline := time.Now().Add(r.cfg.Drain)
	for {
		var still []*job
		for from := 0; from < len(pending); from += lookupChunk {
			part := pending[from:min(from+lookupChunk, len(pending))]
			ids = ids[:0]
			for _, j := range part {
				ids = append(ids, j.id.String())
			}
			found, err := r.store.JobResults(ctx, ids)
			r.probes.Add(1)
			if err != nil {
				return false, fmt.Errorf("reading job results: %w", err)
			}
			for k, j := range part {
				if res, ok := found[ids[k]]; ok {
					j.known(res, r.streams[j.doc])
				} else {
					still = append(still, j)
				}
			}
		}
		pending = still
		written, readReady, settled := r.settled()
		r.progress(Progress{Phase: "drain", Elapsed: r.cfg.Duration, Submitted: total, WriteReady: written, ReadReady: readReady})
		if settled == total {
			return true, nil
		}
		if time.Now().After(deadline) {
			r.cfg.Logger.Warn("drain time is up", zap.Int("jobs", total), zap.Int("without_result", len(pending)),
				zap.Int("not_read_ready", total-settled), zap.Duration("since_start", time.Since(start)))
			return false, nil
		}
		if err := r.roleFailure(); err != nil {
			return false, err
		}
		if err := sleep(ctx, drainPoll); err != nil {
			return false, err
		}
	}
}

// settled counts the jobs with a WRITE_READY result, those of them the
// document view has reached, and the jobs that will not move any more
// (read-ready or failed).
func (r *runner) settled() (written, readReady, settled int) {
	latest := r.samp.latestIndexes()
	for d, js := range r.jobs {
		for _, j := range js {
			switch j.state {
			case jobPending:
			case jobFailed:
				settled++
			default:
				written++
				if j.index <= latest[d] {
					readReady++
					settled++
				}
			}
		}
	}
	return written, readReady, settled
}

// tokenIndex is the index a job's consistency token names on stream, -1
// when it names none (such a job counts as read-ready with its write).
func tokenIndex(res oplog.JobResult, stream oplog.StreamKey) int64 {
	for _, c := range res.Token.Coordinates {
		if c.Stream() == stream {
			return c.Index
		}
	}
	return -1
}

func sleep(ctx context.Context, d time.Duration) error { return sleepUntil(ctx, time.Now().Add(d)) }

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// withSearchPath sets the search_path of the connections of a database URL
// (a postgres:// URL or a keyword/value string) to schema alone.
func withSearchPath(raw, schema string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		if strings.Contains(raw, "search_path") {
			return "", fmt.Errorf("an embedded benchmark runs in a schema of its own: give --database-url as a postgres:// URL to replace the search_path of %q", redact.URL(raw))
		}
		return raw + " search_path=" + schema, nil
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// withPoolSize sets pgxpool's pool_max_conns on a URL that does not set it,
// so the bench's own measuring stays off the roles' connections.
func withPoolSize(raw string, n int) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return raw // a keyword/value string: leave it to the caller
	}
	q := u.Query()
	if q.Get("pool_max_conns") == "" {
		q.Set("pool_max_conns", fmt.Sprint(n))
	}
	u.RawQuery = q.Encode()
	return u.String()
}
