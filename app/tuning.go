package app

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/executor/cache"
	"github.com/doclog/doclog/executor/place"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/pgproj"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/record"
)

// Tuning holds the knobs of the components: the executor and its write
// cache, the projector runners, the analytics inserts, and the two APIs.
// Each field is the component's own Config, of which only the fields the
// tuning flags set are read (the app fills in the rest), so every default
// has one owner: the component's exported Default constants, applied by
// its WithDefaults. A zero field means that default, so Settings built in
// code need not set any.
type Tuning struct {
	Executor   executor.Config
	Cache      cache.Config
	Projectors projectors.Config
	// Analytics: BatchRows, BatchDelay, BatchMinBytes, InsertTimeout and
	// DialTimeout are read; the rest comes from --clickhouse-url.
	Analytics analytics.Config
	Readstore readstore.Config
	Ingest    ingest.Config
	// CopyThreshold is the log's postgres.WithCopyThreshold, which only the
	// executor's appends reach: 0 means postgres.DefaultCopyThreshold, a
	// negative value never takes the copy path.
	CopyThreshold int
}

// copyThreshold is the postgres.WithCopyThreshold of t.CopyThreshold.
func (t Tuning) copyThreshold() int {
	switch {
	case t.CopyThreshold == 0:
		return postgres.DefaultCopyThreshold
	case t.CopyThreshold < 0:
		return 0 // never
	}
	return t.CopyThreshold
}

// tuningAnnotation marks the tuning flags; its value is the flag's key in
// the chart's values (tuning.<group>.<key>).
const tuningAnnotation = "doclog.io/tuning"

// TuningGroups are the components the tuning flags tune, in the order the
// documentation lists them; each flag's name starts with its group.
var TuningGroups = []string{"executor", "projectors", "analytics", "readstore", "ingest"}

// TuningFlags are the tuning flags of fs (bound by BindFlags), in the
// order they were declared.
func TuningFlags(fs *pflag.FlagSet) []*pflag.Flag {
	var flags []*pflag.Flag
	for _, g := range TuningGroups {
		fs.VisitAll(func(f *pflag.Flag) {
			if ValuesKey(f) != "" && strings.HasPrefix(f.Name, g+"-") {
				flags = append(flags, f)
			}
		})
	}
	return flags
}

// ValuesKey is a tuning flag's key in the chart's values, such as
// tuning.executor.jobTimeout for --executor-job-timeout; "" for any
// other flag. The chart turns the key back into the flag's variable
// (DOCLOG_EXECUTOR_JOB_TIMEOUT).
func ValuesKey(f *pflag.Flag) string {
	if v := f.Annotations[tuningAnnotation]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// bindTuningFlags declares the tuning flags. Each default is the
// component's exported one; each usage says what raising the value buys
// and what it costs.
func bindTuningFlags(fs *pflag.FlagSet, s *Settings) {
	b := tuningBinder{fs: fs}
	e, c, p, a, r, i := &s.Tuning.Executor, &s.Tuning.Cache, &s.Tuning.Projectors, &s.Tuning.Analytics, &s.Tuning.Readstore, &s.Tuning.Ingest

	b.int(&e.MaxPollRecords, "executor-max-poll-records", executor.DefaultMaxPollRecords, 1,
		"jobs taken per poll, at most one batch and one Postgres transaction: raising it spreads each transaction's cost over more jobs (throughput) at the cost of longer batches (latency) and more memory per batch")
	b.int(&e.MaxBatchOperations, "executor-max-batch-operations", executor.DefaultMaxBatchOperations, 1,
		"operations one batch carries at most (a job's actions; a larger job goes alone), the jobs past it going into the next batch at once: raising it spreads each transaction's cost over more operations when jobs carry many actions, at the cost of every job of a batch waiting for the whole batch (latency)")
	b.int(&e.MaxRecordBytes, "executor-max-record-bytes", record.DefaultMaxSize, 1,
		"largest job record the executor decodes; a larger one is dead-lettered as RECORD_TOO_LARGE: raising it admits bigger jobs from producers that bypass ingest at the cost of memory per record (keep it within the jobs topic's max.message.bytes)")
	b.int(&e.InlineOperationsBytes, "executor-inline-operations-bytes", record.DefaultInlineOperationsBytes, 1,
		"largest write-ready record that carries its operations (past it, projectors read them from the log): raising it saves projectors a read of the log at the cost of larger records on the write-ready topic")
	b.int64(&e.KeyframeInterval, "executor-keyframe-interval", executor.DefaultKeyframeInterval, 1,
		fmt.Sprintf("a keyframe is written whenever a stream's revision crosses a multiple of this, one interval more for every %d KiB of the stream's state: raising it writes fewer keyframes at the cost of longer replays when a stream is loaded cold or read at a past revision", model.KeyframeBytes>>10))
	b.int64(&e.MaxSkipThreshold, "executor-max-skip-threshold", place.DefaultMaxSkipThreshold, 1,
		"most stored operations that placing a job by timestamp (a load job, or a job of a model that asks for it) may supersede; a placement reaching further back fails the job EXCESSIVE_SHUFFLE: raising it lets replicas that diverged further reconcile at the cost of re-deriving a longer tail in one job")
	b.retries(e, "executor-max-retries",
		"retries after transient errors for a job that sets no maxRetries of its own (0: none, the first such error fails the job; conflicts and outages never count; a job's own maxRetries wins): raising it lets more jobs ride out flaky failures at the cost of a failing job holding its document longer before it is dead-lettered")
	b.duration(&e.RetryBaseDelay, "executor-retry-base-delay", executor.DefaultRetryBaseDelay, time.Nanosecond,
		"first pause of the exponential backoff between a job's retries and between attempts to reach an unavailable dependency: raising it loads a struggling dependency less at the cost of slower recovery")
	b.duration(&e.RetryMaxDelay, "executor-retry-max-delay", executor.DefaultRetryMaxDelay, time.Nanosecond,
		"longest pause of that backoff (at least the base delay): raising it loads a long-failing dependency less at the cost of noticing its return later")
	b.int(&e.ConflictBudget, "executor-conflict-budget", executor.DefaultConflictBudget, 1,
		"times a job may lose a conflict to a concurrent writer of its streams before it fails CONFLICT_BUDGET_EXHAUSTED: raising it lets more contended jobs succeed at the cost of more reloads and retries under contention")
	b.duration(&e.JobTimeout, "executor-job-timeout", executor.DefaultJobTimeout, time.Nanosecond,
		"how long a job may wait for reasons of its own — a queueHint dependency (then TIMEOUT) or a document type this member does not know (then UNKNOWN_DOCUMENT_TYPE); outages do not count: raising it rides out longer rolling upgrades and slow dependencies at the cost of a job that cannot succeed holding its document longer")
	b.duration(&e.DependencyPoll, "executor-dependency-poll", executor.DefaultDependencyPoll, time.Nanosecond,
		"how often a job parked on its queueHint looks its dependencies up again: raising it costs Postgres fewer lookups at the cost of parked jobs starting later")
	b.int(&e.MaxParkedPerPartition, "executor-max-parked-per-partition", executor.DefaultMaxParkedPerPartition, 1,
		"unsettled records a partition may hold (parked jobs and those behind them) before it stops fetching: raising it keeps other documents of the partition flowing longer at the cost of memory and of more re-delivery after a crash")
	b.int(&e.LoadConcurrency, "executor-load-concurrency", executor.DefaultLoadConcurrency, 1,
		"streams loaded from the log at once on cache misses: raising it loads a cold batch faster at the cost of more Postgres connections and load at once (keep it below --database-max-conns)")
	b.duration(&e.StoreTimeout, "executor-store-timeout", executor.DefaultStoreTimeout, time.Nanosecond,
		"bound on one call to Postgres: raising it lets large batches finish on a slow database at the cost of noticing a hung database later")
	b.duration(&e.ProduceTimeout, "executor-produce-timeout", executor.DefaultProduceTimeout, time.Second,
		"bound on producing a batch's write-ready and dead-letter records (at least 1s): raising it rides out longer broker stalls at the cost of reporting the broker unavailable later")
	b.duration(&e.ShutdownTimeout, "executor-shutdown-timeout", executor.DefaultShutdownTimeout, time.Nanosecond,
		"bound on finishing the in-flight batch at a stop: raising it lets a large batch finish rather than be re-delivered at the cost of slower stops (keep it below the pod's termination grace period)")
	b.int(&s.Tuning.CopyThreshold, "executor-copy-threshold", postgres.DefaultCopyThreshold, -1,
		"operations in one batch from which its append writes them with COPY, two round trips more than the single guarded insert (negative: never): raising it keeps mid-sized batches on one round trip, which reach read-ready sooner on a busy machine or a remote database, at the cost of writing larger batches with the costlier multi-row insert")
	b.duration(&e.FetchMaxWait, "executor-fetch-max-wait", executor.DefaultFetchMaxWait, 10*time.Millisecond,
		"how long a broker holds a fetch of the jobs topic that has no new records (at least 10ms): raising it sends an idle cluster fewer empty fetches at the cost of a partition resumed after its parked jobs settle waiting up to this long for its next records")
	b.duration(&e.RebalanceTimeout, "executor-rebalance-timeout", executor.DefaultRebalanceTimeout, 100*time.Millisecond,
		"how long a rebalance of the executors' group waits for each member to settle its in-flight batch and rejoin (at least 100ms): raising it lets a member finishing a long batch keep its place at the cost of the whole group's partitions standing still that long behind a stuck member")
	b.duration(&e.OffsetCommitInterval, "executor-offset-commit-interval", executor.DefaultOffsetCommitInterval, time.Nanosecond,
		"how often, at most, the executor commits its consumed offsets: raising it costs the group coordinator fewer writes at the cost of more jobs re-read (and found settled) after a crash")
	b.bool(&e.AsyncAnnounce, "executor-async-announce", false,
		"produce a batch's write-ready records and dead letters without waiting for the brokers' acknowledgements before the next batch (the offsets still move past a job only once acknowledged): raising it to true keeps the executor working while a replicated produce is in flight, which shortens the jobs' wait where a produce costs milliseconds (acks=all over a network), at the cost of smaller batches and more statements per job where it does not")
	b.int(&c.MaxStreams, "executor-cache-max-streams", cache.DefaultMaxStreams, 1,
		"streams whose head state the write cache holds: raising it saves loads from the log for a larger working set at the cost of memory")
	b.int64(&c.MaxBytes, "executor-cache-max-bytes", cache.DefaultMaxBytes, cache.EntryOverhead,
		"bytes of canonical JSON the write cache holds (about 5.4 times as much Go heap): raising it saves loads from the log for larger documents at the cost of memory")
	b.int(&c.ReadPageSize, "executor-cache-read-page-size", cache.DefaultReadPageSize, 1,
		"operations one log read fetches when a stream is rebuilt: raising it rebuilds long streams in fewer round trips at the cost of memory per read")

	b.int(&p.MaxPollRecords, "projectors-max-poll-records", projectors.DefaultMaxPollRecords, 1,
		"write-ready records per poll of docview and indexer, which is one Postgres transaction (analytics takes --analytics-batch-rows): raising it spreads each transaction's cost over more records at the cost of later visibility per batch and more memory")
	b.int64(&p.HeadCacheBytes, "projectors-head-cache-bytes", projectors.DefaultHeadCacheBytes, -1,
		"bytes of canonical JSON of verified stream states each projector keeps between batches (negative: none): raising it saves reading back the state it wrote last at the cost of memory (about five times as much heap)")
	b.duration(&p.ReconcileInterval, "projectors-reconcile-interval", projectors.DefaultReconcileInterval, -1,
		"how often the reconciler compares the log's stream heads with the projection, which heals a lost last record (negative: never): raising it loads Postgres less at the cost of such a stream staying behind longer")
	b.int(&p.ReconcilePageSize, "projectors-reconcile-page-size", projectors.DefaultReconcilePageSize, 1,
		"documents one reconciler step compares: raising it makes a pass take fewer queries at the cost of larger ones")
	b.duration(&p.OffsetCommitInterval, "projectors-offset-commit-interval", projectors.DefaultOffsetCommitInterval, time.Nanosecond,
		"how often the projectors commit Kafka offsets, which only feed lag tools (the checkpoint in Postgres is the truth): raising it costs the broker fewer writes at the cost of lag figures up to this much older")
	b.duration(&p.RetryBaseDelay, "projectors-retry-base-delay", projectors.DefaultRetryBaseDelay, time.Nanosecond,
		"first pause before a batch that failed for want of its database is retried: raising it loads a struggling database less at the cost of slower recovery")
	b.duration(&p.RetryMaxDelay, "projectors-retry-max-delay", projectors.DefaultRetryMaxDelay, time.Nanosecond,
		"longest such pause (at least the base delay): raising it loads a long-failing database less at the cost of noticing its return later")

	b.duration(&p.FetchMaxWait, "projectors-fetch-max-wait", projectors.DefaultFetchMaxWait, 10*time.Millisecond,
		"how long a broker holds a fetch of the write-ready topic that has no new records, for docview and indexer (analytics waits --analytics-batch-delay; at least 10ms): raising it sends an idle cluster fewer empty fetches at the cost of a broker that goes silent during a held fetch being noticed up to this much later (records that arrive are answered at once either way)")
	b.duration(&p.RebalanceTimeout, "projectors-rebalance-timeout", projectors.DefaultRebalanceTimeout, 100*time.Millisecond,
		"how long a rebalance of a projector's group waits for each member to commit its in-flight batch and rejoin (at least 100ms): raising it lets a member finishing a long batch keep its place at the cost of the group's partitions standing still that long behind a stuck member")

	b.int(&a.BatchRows, "analytics-batch-rows", analytics.DefaultBatchRows, 1,
		"write-ready records per poll of the analytics projector, each partition's share one ClickHouse insert per table: raising it makes fewer, larger inserts (which ClickHouse prefers) at the cost of memory and later visibility")
	b.duration(&a.BatchDelay, "analytics-batch-delay", analytics.DefaultBatchDelay, 10*time.Millisecond,
		"how long a fetch waits for --analytics-batch-min-bytes before it returns what there is (10ms to 1m): raising it makes larger inserts under light traffic at the cost of analytics lagging up to this much")
	b.int32(&a.BatchMinBytes, "analytics-batch-min-bytes", analytics.DefaultBatchMinBytes, 1,
		"bytes of records a fetch waits for, up to --analytics-batch-delay: raising it makes larger inserts at the cost of waiting out the delay more often")
	b.duration(&a.InsertTimeout, "analytics-insert-timeout", analytics.DefaultInsertTimeout, time.Nanosecond,
		"bound on one ClickHouse insert: raising it lets large inserts finish on a slow server at the cost of noticing a hung one later")
	b.duration(&a.DialTimeout, "analytics-dial-timeout", analytics.DefaultDialTimeout, time.Nanosecond,
		"bound on connecting to ClickHouse: raising it tolerates a slow network at the cost of noticing an unreachable server later")

	b.duration(&r.DefaultWait, "readstore-default-wait", readstore.DefaultWait, time.Nanosecond,
		"how long a read with a consistency token and no ?wait= waits for its projection: raising it answers fewer such reads 'not yet' at the cost of holding them, and their connections, longer")
	b.duration(&r.MaxWait, "readstore-max-wait", readstore.DefaultMaxWait, time.Nanosecond,
		"longest ?wait= a read may ask for (at least --readstore-default-wait): raising it lets clients wait out longer lags at the cost of more requests held open")
	b.duration(&r.PollInterval, "readstore-poll-interval", readstore.DefaultPollInterval, time.Nanosecond,
		"how often the shared poller looks up the streams that waiting reads need, besides at once after each projector commit it is notified of: raising it costs Postgres fewer lookups at the cost of waiting reads answering later when a notification is missed")
	b.int(&r.PollBatch, "readstore-poll-batch", readstore.DefaultPollBatch, 1,
		"streams one lookup of that poller names: raising it takes fewer queries when many reads wait at the cost of larger ones")
	b.int(&r.DefaultPageLimit, "readstore-default-page-limit", readstore.DefaultPageLimit, 1,
		"page size of a list without ?limit=: raising it takes clients fewer requests at the cost of larger answers")
	b.int(&r.MaxPageLimit, "readstore-max-page-limit", readstore.DefaultMaxPageLimit, 1,
		"largest ?limit= accepted (at least the default page size): raising it lets clients page faster at the cost of heavier queries one client can ask for")
	b.duration(&r.ReadHeaderTimeout, "readstore-read-header-timeout", readstore.DefaultReadHeaderTimeout, time.Nanosecond,
		"bound on reading a request's headers: raising it tolerates slower clients at the cost of idle connections held longer (slowloris)")
	b.duration(&r.ShutdownTimeout, "readstore-shutdown-timeout", readstore.DefaultShutdownTimeout, time.Nanosecond,
		"bound on finishing in-flight requests at a stop: raising it lets long waits finish at the cost of slower stops")
	b.int(&r.FeedMaxStreams, "readstore-feed-max-streams", readstore.DefaultFeedMaxStreams, 1,
		"change-feed streams one process serves at once, one more answered 503: raising it admits more subscribers at the cost of a connection, a goroutine and a page of the tail per stream")
	b.duration(&r.FeedHeartbeat, "readstore-feed-heartbeat", readstore.DefaultFeedHeartbeat, time.Nanosecond,
		"longest silence of a change-feed stream before it sends a heartbeat with its position (shorter than --readstore-feed-max-age): raising it sends fewer frames at the cost of proxies more likely to drop idle streams and resume points moving on later")
	b.duration(&r.FeedWriteTimeout, "readstore-feed-write-timeout", readstore.DefaultFeedWriteTimeout, time.Nanosecond,
		"bound on one write to a change-feed stream; a consumer that does not read within it is disconnected: raising it keeps slow consumers connected at the cost of holding their stream, and its slot, longer")
	b.duration(&r.FeedMaxAge, "readstore-feed-max-age", readstore.DefaultFeedMaxAge, time.Nanosecond,
		"longest life of a change-feed stream, ended with event: end so the client reconnects: raising it reconnects clients less often at the cost of streams staying on one instance longer (uneven load after a scale-out)")
	b.duration(&r.FeedPollInterval, "readstore-feed-poll-interval", readstore.DefaultFeedPollInterval, time.Nanosecond,
		"how often the one shared poll reads the end of the log while change-feed streams wait at the head: raising it costs Postgres fewer queries at the cost of events reaching subscribers later")
	b.int(&r.FeedPageSize, "readstore-feed-page-size", readstore.DefaultFeedPageSize, 1,
		"rows of the log a change-feed stream reads and holds at a time: raising it takes catching-up streams fewer queries at the cost of memory per stream")
	b.int(&r.FeedMaxFilterValues, "readstore-feed-max-filter-values", readstore.DefaultFeedMaxFilterValues, 1,
		"values one change-feed filter parameter may take: raising it admits larger selections at the cost of more matching work per event")

	b.int64(&i.MaxBodyBytes, "ingest-max-body-bytes", ingest.DefaultMaxBodyBytes, 1,
		"largest request body, answered 413 beyond (at most the 1 MiB a job record may have): raising it admits larger jobs at the cost of memory per request")
	b.int(&i.MaxActionsPerJob, "ingest-max-actions-per-job", ingest.DefaultMaxActionsPerJob, 1,
		"most actions in one job: raising it admits larger jobs at the cost of longer reductions that hold their partition")
	b.int(&i.MaxInputBytes, "ingest-max-input-bytes", ingest.DefaultMaxInputBytes, 1,
		"largest input of one action: raising it admits larger inputs at the cost of larger operations in the log and the projections")
	b.duration(&i.MaxWait, "ingest-max-wait", ingest.DefaultMaxWait, time.Nanosecond,
		"longest ?wait= of a job status request: raising it saves clients re-polling at the cost of more requests held open")
	b.duration(&i.PollInterval, "ingest-poll-interval", ingest.DefaultPollInterval, time.Nanosecond,
		"how often the shared poller looks up the jobs clients wait for: raising it costs Postgres fewer lookups at the cost of waits answering later")
	b.int(&i.PollBatch, "ingest-poll-batch", ingest.DefaultPollBatch, 1,
		"job ids one lookup of that poller names: raising it takes fewer queries when many clients wait at the cost of larger ones")
	b.duration(&i.ProduceTimeout, "ingest-produce-timeout", ingest.DefaultProduceTimeout, time.Nanosecond,
		"how long a submit waits for the broker's acknowledgement before answering 503: raising it rides out longer broker stalls at the cost of clients waiting longer for a refusal")
	b.duration(&i.ReadHeaderTimeout, "ingest-read-header-timeout", ingest.DefaultReadHeaderTimeout, time.Nanosecond,
		"bound on reading a request's headers: raising it tolerates slower clients at the cost of idle connections held longer (slowloris)")
	b.duration(&i.ShutdownTimeout, "ingest-shutdown-timeout", ingest.DefaultShutdownTimeout, time.Nanosecond,
		"bound on finishing in-flight requests at a stop: raising it lets long waits finish at the cost of slower stops")
	b.duration(&i.MaxExecutorLag, "ingest-max-executor-lag", ingest.DefaultMaxExecutorLag, -1,
		"longest wait of a job for the executor group: while older jobs wait unprocessed, or more than the group drains in twice this time, submits are answered 429 executor_lag with a Retry-After (negative: no bound): raising it lets bursts through unrefused at the cost of longer waits to READ_READY when the executors fall behind")
	b.int64(&i.MaxExecutorLagRecords, "ingest-max-executor-lag-records", ingest.DefaultMaxExecutorLagRecords, -1,
		"most jobs waiting for the executor group over all partitions, however young, past which submits are refused the same way (negative: no bound): raising it lets larger bursts through at the cost of a longer backlog")
	b.duration(&i.ExecutorLagInterval, "ingest-executor-lag-interval", ingest.DefaultExecutorLagInterval, time.Nanosecond,
		"how often ingest measures that backlog, one request to the brokers shared by every submit: raising it costs the brokers fewer requests at the cost of refusing, and accepting again, later")
}

// validateTuning checks the tuning with each component's own Validate (the
// flags' own bounds were checked when they were set). The components'
// required parts are placeholders here: they are the app's to supply and
// are not what is checked.
func (s *Settings) validateTuning() []error {
	var errs []error
	wrap := func(group string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s-* settings: %w", group, err))
		}
	}
	t := s.Tuning
	kc := kafka.Config{Seeds: []string{"localhost:9092"}}
	ex := t.Executor
	ex.Store, ex.Registry, ex.Kafka = (*postgres.Store)(nil), &model.Registry{}, kc
	wrap("executor", ex.WithDefaults().Validate())
	wrap("executor-cache", t.Cache.WithDefaults().Validate())
	pr := t.Projectors
	pr.Projector, pr.Store, pr.Log, pr.Registry, pr.Kafka = docview.Projector{}, (*pgproj.Store)(nil), (*postgres.Store)(nil), &model.Registry{}, kc
	wrap("projectors", pr.WithDefaults().Validate())
	wrap("analytics", s.analyticsTuning(analytics.Config{Addr: []string{"localhost:9000"}}).WithDefaults().Validate())
	wrap("readstore", t.Readstore.WithDefaults().Validate())
	wrap("ingest", t.Ingest.WithDefaults().Validate())
	return errs
}

// analyticsTuning is cfg with the analytics tuning applied.
func (s *Settings) analyticsTuning(cfg analytics.Config) analytics.Config {
	t := s.Tuning.Analytics
	cfg.BatchRows, cfg.BatchDelay, cfg.BatchMinBytes = t.BatchRows, t.BatchDelay, t.BatchMinBytes
	cfg.InsertTimeout, cfg.DialTimeout = t.InsertTimeout, t.DialTimeout
	return cfg
}

// tuningBinder declares tuning flags whose values refuse what their field
// cannot hold: below the minimum, and 0 where the field's zero would
// silently mean its default instead.
type tuningBinder struct{ fs *pflag.FlagSet }

// valuesKey is a flag's key in the chart: executor-job-timeout is
// tuning.executor.jobTimeout.
func valuesKey(name string) string {
	group, rest, _ := strings.Cut(name, "-")
	words := strings.Split(rest, "-")
	for i := 1; i < len(words); i++ {
		words[i] = strings.ToUpper(words[i][:1]) + words[i][1:]
	}
	return "tuning." + group + "." + strings.Join(words, "")
}

func (b tuningBinder) add(v pflag.Value, name, usage string) {
	f := b.fs.VarPF(v, name, "", usage)
	if err := b.fs.SetAnnotation(f.Name, tuningAnnotation, []string{valuesKey(name)}); err != nil {
		panic(err)
	}
}

func (b tuningBinder) bool(p *bool, name string, def bool, usage string) {
	*p = def
	b.add((*boolKnob)(p), name, usage)
	b.fs.Lookup(name).NoOptDefVal = "true" // --name alone turns it on, as a bool flag does
}

// boolKnob is a tuning flag's value that is on or off.
type boolKnob bool

func (k *boolKnob) String() string { return strconv.FormatBool(bool(*k)) }
func (k *boolKnob) Type() string   { return "bool" }

func (k *boolKnob) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("not true or false")
	}
	*k = boolKnob(v)
	return nil
}

func (b tuningBinder) int(p *int, name string, def, lowest int, usage string) {
	b.add(newKnob(p, def, int64(lowest), "int", parseInt[int], fmtInt[int]), name, usage)
}

func (b tuningBinder) int32(p *int32, name string, def, lowest int32, usage string) {
	b.add(newKnob(p, def, int64(lowest), "int32", parseInt[int32], fmtInt[int32]), name, usage)
}

func (b tuningBinder) int64(p *int64, name string, def, lowest int64, usage string) {
	b.add(newKnob(p, def, lowest, "int64", parseInt[int64], fmtInt[int64]), name, usage)
}

// duration's lowest is a duration; -1 (a negative lowest) means a negative
// value is allowed (it disables what the flag paces).
func (b tuningBinder) duration(p *time.Duration, name string, def, lowest time.Duration, usage string) {
	b.add(newKnob(p, def, int64(lowest), "duration", time.ParseDuration, time.Duration.String), name, usage)
}

// retries declares the executor's retry limit, 0 included: a zero
// MaxRetries means the default, so 0 is NoRetries.
func (b tuningBinder) retries(e *executor.Config, name, usage string) {
	e.MaxRetries, e.NoRetries = executor.DefaultMaxRetries, false
	b.add(retriesValue{e}, name, usage)
}

type retriesValue struct{ e *executor.Config }

func (v retriesValue) String() string { return strconv.Itoa(v.e.MaxRetries) }
func (v retriesValue) Type() string   { return "int" }

func (v retriesValue) Set(s string) error {
	n, err := parseInt[int](s)
	if err != nil {
		return err
	}
	if n < 0 {
		return errors.New("must be at least 0")
	}
	v.e.MaxRetries, v.e.NoRetries = n, n == 0
	return nil
}

type number interface{ ~int | ~int32 | ~int64 }

// knob is a tuning flag's value. A negative lowest allows every negative
// value and every positive one, refusing only 0 (which would mean the
// default).
type knob[T number] struct {
	p      *T
	lowest int64
	typ    string
	parse  func(string) (T, error)
	format func(T) string
}

func newKnob[T number](p *T, def T, lowest int64, typ string, parse func(string) (T, error), format func(T) string) *knob[T] {
	*p = def
	return &knob[T]{p: p, lowest: lowest, typ: typ, parse: parse, format: format}
}

func (k *knob[T]) String() string { return k.format(*k.p) }
func (k *knob[T]) Type() string   { return k.typ }

func (k *knob[T]) Set(s string) error {
	v, err := k.parse(s)
	if err != nil {
		return err
	}
	show := func(n int64) string { return k.format(T(n)) }
	switch {
	case k.lowest < 0 && v == 0:
		return errors.New("must not be 0: give a positive value, or a negative one to turn it off")
	case k.lowest == 1 && int64(v) < 1 && k.typ == "duration":
		return errors.New("must be positive")
	case k.lowest >= 0 && int64(v) < k.lowest:
		return fmt.Errorf("must be at least %s", show(k.lowest))
	}
	*k.p = v
	return nil
}

func parseInt[T number](s string) (T, error) {
	var zero T
	n, err := strconv.ParseInt(s, 0, int(8*sizeOf(zero)))
	if err != nil {
		return zero, errors.New("not an integer in range")
	}
	return T(n), nil
}

func fmtInt[T number](v T) string { return strconv.FormatInt(int64(v), 10) }

func sizeOf[T number](v T) int {
	switch any(v).(type) {
	case int32:
		return 4
	default:
		return 8
	}
}
