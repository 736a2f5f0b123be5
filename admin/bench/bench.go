// Package bench is `doclogctl bench`: workload W1 (below, and the pipeline
// section of docs/benchmarks.md) against a running doclog or one composed
// in-process (Embedded), measured from the outside.
//
// W1 is Documents documents of doclog/json receiving MERGE_PATCH actions on
// their global scope, ActionsPerDocument per round, for Duration, or as a
// fixed workload: Rounds rounds per document, or Operations in all. In mode
// single every job carries one action and a document's next job is
// submitted once the previous one was acknowledged (all documents at once);
// in mode batch every job carries ActionsPerDocument actions. Jobs go
// through the ingest API (ViaHTTP) or straight to the jobs topic
// (ViaKafka). With Rate zero the loop is closed (each document submits as
// fast as acknowledgements come back); with Rate set it is open: jobs are
// scheduled at a fixed rate and latency counts from the scheduled time, so
// a stalled pipeline cannot hide its queueing delay.
//
// How it measures, without a poll per job (the polls would load the
// database being measured):
//   - WRITE_READY: after the drain, the job results are read back in
//     chunks; a result's created_at (the executor's transaction start, by
//     the database clock) is the job's WRITE_READY time. While draining, the
//     jobs without a result yet are looked up in chunks every 200ms.
//   - READ_READY: a sampler reads the document view's last applied index of
//     every benchmarked stream in one query as each of the view projector's
//     commits is notified, and every SampleInterval; a job is READ_READY at
//     the first sample showing its consistency token's index. The
//     resolution is about one query (the interval with SamplePollOnly).
//   - Throughput to a stage is the jobs (operations) that reached it over
//     the time from the first submission to the last job reaching it.
//   - Postgres activity is the delta of pg_stat_database (and of
//     pg_stat_statements when installed) over the measured phase, minus the
//     benchmark's own probes. Both are database-wide: other clients of the
//     same database count too.
//   - The time series (Config.Series), a row per SeriesInterval while jobs
//     are submitted: the latency of the jobs that became READ_READY in the
//     interval, from the same sampler; their indexes come from reading, at
//     each tick, the results of the jobs not yet seen written (a statement
//     per 5,000 jobs, a few per interval). Lag is the consumer groups'
//     committed offsets against the topics' ends; memory and CPU are read
//     from /proc for each followed process and its descendants.
//   - Peak RSS is VmHWM from /proc: this process's when embedded, else the
//     processes named doclog on this host, if any.
//
// W2 is W1 on large documents: with StateBytes set, every document first
// receives records (about 88 canonical bytes each) until its global state is
// that large, before the measured phase, and then each action changes one
// member of one record, the records taken in turn, so each change is small
// and the changes are spread over the whole document.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/kafka"
)

// Modes and submission paths.
const (
	ModeSingle = "single"
	ModeBatch  = "batch"
	ViaHTTP    = "http"
	ViaKafka   = "kafka"
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultDocuments      = 200
	DefaultActions        = 50
	DefaultDuration       = 30 * time.Second
	DefaultDrain          = 2 * time.Minute
	DefaultSampleInterval = 20 * time.Millisecond
	DefaultBaselineChunk  = 1000
	DefaultPartitions     = 4
	// drainPoll is how often jobs without a result are looked up while
	// draining.
	drainPoll = 200 * time.Millisecond
	// lookupChunk bounds the job ids of one result lookup.
	lookupChunk = 5000
	// maxStateBytes bounds StateBytes: the write cache's default byte
	// bound is 64 MiB.
	maxStateBytes = 16 << 20
)

// Config configures a run.
type Config struct {
	// Mode is ModeSingle (default) or ModeBatch.
	Mode string
	// Via is ViaHTTP (default) or ViaKafka.
	Via string
	// Documents is D. Default 200.
	Documents int
	// ActionsPerDocument is K: the actions of a round per document, and the
	// actions of one job in mode batch. Default 50.
	ActionsPerDocument int
	// Duration is how long jobs are submitted. Default 30s, unless Rounds
	// or Operations fixes the workload instead; shorter runs measure
	// start-up and drain more than the steady state.
	Duration time.Duration
	// Rounds fixes the workload: every document receives Rounds rounds of
	// ActionsPerDocument actions (in mode single Rounds×K jobs of one
	// action, in mode batch Rounds jobs of K) and stops. The reference
	// reactor's comparison is W1 at one round: 200 × 50 = 10,000
	// operations. A refused submission is retried until accepted (for
	// about a minute at most). Excludes Duration and Operations.
	Rounds int
	// Operations fixes the workload at this many operations over all
	// documents, job i going to document i mod Documents; in mode batch
	// it must be a multiple of ActionsPerDocument. Excludes Duration and
	// Rounds.
	Operations int
	// Rate, in operations per second over all documents, turns the open
	// loop on. Zero: closed loop.
	Rate float64
	// Drain bounds the wait, after submission stops, for every job to reach
	// READ_READY. Default 2m.
	Drain time.Duration
	// SampleInterval is how often the READ_READY sampler reads the document
	// view. Default 20ms. Unless SamplePollOnly, it also reads it as soon as
	// the document view's projector notifies a commit (pgproj's
	// ProgressChannel), so the resolution is then about one query, and the
	// interval only bounds a notification missed.
	SampleInterval time.Duration
	// SamplePollOnly samples only every SampleInterval, as before the
	// notifications: to compare with figures taken that way.
	SamplePollOnly bool
	// JobsPerRequest, above 1, submits through POST /v1/jobs:batch (ViaHTTP
	// only): the documents are dealt into groups of this many, and a
	// group's jobs go in requests of up to this many (closed loop: the next
	// job of each of its documents; open loop: those due by the time the
	// previous request was answered). Default 1: a POST /v1/jobs per job.
	JobsPerRequest int
	// Coalesce, above 0, submits each job through the client package's
	// Batcher (ViaHTTP only, JobsPerRequest 1): every document still
	// submits one job at a time, and the jobs submitted while the
	// batcher's requests are in flight share the next POST
	// /v1/jobs:batch, up to this many in one. Default 0: a POST /v1/jobs
	// per job.
	Coalesce int
	// StateBytes, when positive, runs workload W2: each document's global
	// state is filled to about this many canonical bytes before the
	// measured phase, and each action then changes one of its records.
	// Zero (default): W1, states of a few hundred bytes.
	StateBytes int
	// Baseline adds the raw COPY of the run's operation rows.
	Baseline bool
	// BaselineChunk is the rows of one COPY. Default 1000.
	BaselineChunk int

	// IngestURL is the ingest API of a running doclog (ViaHTTP, not
	// Embedded).
	IngestURL string
	// AuthToken is sent as a bearer token to the ingest API.
	AuthToken string
	// DatabaseURL is doclog's Postgres. Required.
	DatabaseURL string
	// DatabaseConnectTimeout bounds each connection attempt when the URL
	// has no connect_timeout. Default connflags' (10s).
	DatabaseConnectTimeout time.Duration
	// Kafka reaches the brokers (ViaKafka, or Embedded).
	Kafka kafka.Config
	// TopicPrefix is the prefix of doclog's topics. Embedded runs add a
	// fresh prefix of their own under it, and delete their topics after.
	TopicPrefix string
	// Embedded runs ingest, the executor and the docview and indexer
	// projectors in this process against DatabaseURL and Kafka, in a
	// schema of their own (doclog_bench_<id>, migrated first, dropped
	// after) so that a doclog already using the database is left alone.
	Embedded bool
	// Partitions is the jobs topic's partition count of an embedded run.
	// Default 4.
	Partitions int32
	// NoBackpressure turns the embedded ingest's backlog bounds off
	// (ingest.Config.MaxExecutorLag and MaxExecutorLagRecords negative),
	// so a closed loop submits as fast as the broker acknowledges rather
	// than at the rate the executors sustain. Default false: doclog
	// serve's bounds.
	NoBackpressure bool
	// AsyncAnnounce runs the embedded executor with
	// executor.Config.AsyncAnnounce (doclog serve's
	// --executor-async-announce): its announcements are produced without
	// waiting before the next batch. Default false, as doclog serve's.
	AsyncAnnounce bool

	// Series, if set, receives the run's time series as CSV: a row every
	// SeriesInterval while jobs are submitted (see SeriesRow).
	Series io.Writer
	// SeriesInterval is the length of a row of the series. Default 10s.
	SeriesInterval time.Duration
	// SeriesProcesses are the processes whose memory and CPU the series
	// follows, each with its children. Default: those of the report's CPU
	// (this process, the run's doclog processes, the Postgres cluster and
	// the local Kafka brokers).
	SeriesProcesses []SeriesProcess

	// CPUProfile, if set, receives a pprof CPU profile of this process over
	// the measured phase (submission and drain): with Embedded, of the
	// roles at work.
	CPUProfile io.Writer

	// Logger logs the embedded roles and the run. Default: none.
	Logger *zap.Logger
	// Progress, if set, is called about five times a second with the run's
	// progress.
	Progress func(Progress)
}

// Progress is where a run is.
type Progress struct {
	// Phase is "setup", "submit", "drain", "legs", "statistics", "baseline" or "done".
	Phase string
	// Elapsed and Total are the submission time so far and Duration (zero
	// for a fixed workload).
	Elapsed, Total time.Duration
	// Jobs is the jobs a fixed workload submits in all, zero when the run
	// lasts Duration.
	Jobs int
	// Submitted, WriteReady and ReadReady count jobs; WriteReady and
	// ReadReady are known only while draining (-1 before).
	Submitted, WriteReady, ReadReady int
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	setDefault(&c.Mode, ModeSingle)
	setDefault(&c.Via, ViaHTTP)
	setDefault(&c.Documents, DefaultDocuments)
	setDefault(&c.ActionsPerDocument, DefaultActions)
	if c.Rounds == 0 && c.Operations == 0 {
		setDefault(&c.Duration, DefaultDuration)
	}
	setDefault(&c.Drain, DefaultDrain)
	setDefault(&c.SampleInterval, DefaultSampleInterval)
	setDefault(&c.BaselineChunk, DefaultBaselineChunk)
	setDefault(&c.Partitions, DefaultPartitions)
	setDefault(&c.SeriesInterval, DefaultSeriesInterval)
	setDefault(&c.JobsPerRequest, 1)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Kafka = c.Kafka.WithDefaults()
	return c
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Validate checks a configuration after WithDefaults.
func (c Config) Validate() error {
	var errs []error
	if c.Mode != ModeSingle && c.Mode != ModeBatch {
		errs = append(errs, fmt.Errorf("the mode must be single or batch, not %q", c.Mode))
	}
	if c.Via != ViaHTTP && c.Via != ViaKafka {
		errs = append(errs, fmt.Errorf("jobs go via http or kafka, not %q", c.Via))
	}
	if c.Documents < 1 {
		errs = append(errs, fmt.Errorf("the documents must number at least 1, not %d", c.Documents))
	}
	if c.ActionsPerDocument < 1 || c.ActionsPerDocument > 100 {
		errs = append(errs, fmt.Errorf("the actions per document must be 1 to 100 (ingest's limit per job), not %d", c.ActionsPerDocument))
	}
	if c.Rounds < 0 || c.Operations < 0 {
		errs = append(errs, errors.New("the rounds and operations must not be negative"))
	}
	switch fixed := c.Rounds > 0 || c.Operations > 0; {
	case c.Rounds > 0 && c.Operations > 0:
		errs = append(errs, errors.New("give the rounds or the operations, not both"))
	case fixed && c.Duration != 0:
		errs = append(errs, errors.New("a fixed workload (rounds or operations) and a duration exclude each other"))
	case !fixed && c.Duration <= 0:
		errs = append(errs, errors.New("the duration must be positive"))
	}
	if c.Operations > 0 && c.Mode == ModeBatch && c.Operations%c.ActionsPerDocument != 0 {
		errs = append(errs, fmt.Errorf("in mode batch the operations must be a multiple of the actions per job (%d), not %d", c.ActionsPerDocument, c.Operations))
	}
	if c.Drain <= 0 || c.SampleInterval <= 0 {
		errs = append(errs, errors.New("the drain and sample interval must be positive"))
	}
	if c.StateBytes < 0 || c.StateBytes > maxStateBytes {
		errs = append(errs, fmt.Errorf("the state size must be 0 to %d bytes, not %d", maxStateBytes, c.StateBytes))
	}
	if c.JobsPerRequest < 1 || c.JobsPerRequest > maxJobsPerRequest {
		errs = append(errs, fmt.Errorf("the jobs per request must be 1 to %d (ingest's default limit of a batch), not %d", maxJobsPerRequest, c.JobsPerRequest))
	}
	if c.Coalesce < 0 || c.Coalesce > maxJobsPerRequest {
		errs = append(errs, fmt.Errorf("the jobs a coalesced request may carry must be 0 to %d (ingest's default limit of a batch), not %d", maxJobsPerRequest, c.Coalesce))
	}
	if c.Coalesce > 0 && c.Via != ViaHTTP {
		errs = append(errs, errors.New("coalescing submits through the ingest API's batch endpoint: submit via http"))
	}
	if c.Coalesce > 0 && c.JobsPerRequest > 1 {
		errs = append(errs, errors.New("coalescing and jobs per request above 1 exclude each other: the batcher forms the requests itself"))
	}
	if c.JobsPerRequest > 1 && c.Via != ViaHTTP {
		errs = append(errs, errors.New("jobs per request above 1 go through the ingest API's batch endpoint: submit via http"))
	}
	if c.SeriesInterval <= 0 {
		errs = append(errs, fmt.Errorf("the series interval must be positive, not %s", c.SeriesInterval))
	}
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("the rate must not be negative, got %g", c.Rate))
	}
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("no database: the benchmark reads job results and statistics from doclog's Postgres"))
	}
	if c.Via == ViaHTTP && !c.Embedded && c.IngestURL == "" {
		errs = append(errs, errors.New("no ingest URL: give one, submit via kafka, or run embedded"))
	}
	if c.NoBackpressure && !c.Embedded {
		errs = append(errs, errors.New("no backpressure applies to an embedded run: a running doclog's ingest has its own --ingest-max-executor-lag"))
	}
	if c.AsyncAnnounce && !c.Embedded {
		errs = append(errs, errors.New("async announce applies to an embedded run: a running doclog's executor has its own --executor-async-announce"))
	}
	if (c.Via == ViaKafka || c.Embedded) && len(c.Kafka.Seeds) == 0 {
		errs = append(errs, errors.New("no Kafka seeds"))
	}
	return errors.Join(errs...)
}

// opsPerJob is the operations one job carries in the configured mode.
func (c Config) opsPerJob() int {
	if c.Mode == ModeBatch {
		return c.ActionsPerDocument
	}
	return 1
}

// fixedJobs is the jobs of a fixed workload over all documents, or zero
// when the run lasts Duration.
func (c Config) fixedJobs() int {
	switch {
	case c.Rounds > 0:
		return c.Rounds * c.ActionsPerDocument / c.opsPerJob() * c.Documents
	case c.Operations > 0:
		return (c.Operations + c.opsPerJob() - 1) / c.opsPerJob()
	}
	return 0
}

// jobsOf is document d's share of a fixed workload's jobs (job i goes to
// document i mod Documents), or -1 when the run lasts Duration.
func (c Config) jobsOf(d int) int {
	n := c.fixedJobs()
	if n == 0 {
		return -1
	}
	share := n / c.Documents
	if d < n%c.Documents {
		share++
	}
	return share
}

// workload says what the run submits, for the report.
func (c Config) workload() string {
	switch {
	case c.Rounds > 0:
		return fmt.Sprintf("%d round(s) per document, %d operations", c.Rounds, c.fixedJobs()*c.opsPerJob())
	case c.Operations > 0:
		return fmt.Sprintf("%d operations", c.Operations)
	}
	return "for " + c.Duration.String()
}

// Run runs the benchmark and returns its report. A run whose jobs do not
// all reach READ_READY within the drain still returns its report (Drained
// false); errors are reserved for runs that could not measure.
func Run(ctx context.Context, cfg Config) (_ *Report, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r, err := newRunner(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.close()) }()
	return r.run(ctx)
}
