package ingest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/record"
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultAddr              = ":8080"
	DefaultMaxBodyBytes      = 1 << 20
	DefaultMaxBatchJobs      = 1000
	DefaultMaxBatchBytes     = 8 << 20
	DefaultMaxActionsPerJob  = 100
	DefaultMaxInputBytes     = 256 << 10
	DefaultMaxWait           = 30 * time.Second
	DefaultPollInterval      = 100 * time.Millisecond
	DefaultPollBatch         = 1000
	DefaultProduceTimeout    = 10 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultJobsRetention     = kafka.DefaultJobsRetention
	// The backlog bounds are far above what the executors hold while they
	// keep up (jobs wait tens of milliseconds) and keep a job's wait for an
	// executor under a second, so that it reaches READ_READY within about
	// one.
	DefaultMaxExecutorLag        = 300 * time.Millisecond
	DefaultMaxExecutorLagRecords = 20000
	DefaultExecutorLagInterval   = kafka.DefaultBacklogInterval

	// maxIdempotencyKey bounds the Idempotency-Key header; the key is
	// hashed into the job id, so its length only costs memory.
	maxIdempotencyKey = 256
)

// Config configures the ingest API. The zero value is usable after
// WithDefaults, with authentication off.
type Config struct {
	// Addr is the address the Server listens on. Default ":8080".
	Addr string
	// JobsTopic is the topic jobs are produced to, prefix included.
	// Default "doclog.jobs".
	JobsTopic string
	// BearerTokens are the write tokens a client may present in
	// "Authorization: Bearer <token>": they may call every route. Any of
	// them is accepted, so tokens can be rotated without downtime. With no
	// token here nor in ReadTokens authentication is off, and the handler
	// logs a warning at start-up. Default none.
	BearerTokens []string
	// ReadTokens may only read: GET /v1/jobs/{id}. A read token on a route
	// that submits is answered 403 forbidden. Default none.
	ReadTokens []string
	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	// Default 1 MiB, which with record.DefaultMaxSize keeps every accepted
	// job within the broker's default message size.
	MaxBodyBytes int64
	// MaxBatchJobs bounds the jobs of one POST /v1/jobs:batch; more are
	// answered 413 too_many_jobs. Default 1000.
	MaxBatchJobs int
	// MaxBatchBytes bounds the body of a POST /v1/jobs:batch, answered 413
	// body_too_large beyond it; each job in it is held to MaxBodyBytes.
	// Default 8 MiB.
	MaxBatchBytes int64
	// MaxActionsPerJob bounds the actions of one job (a create job's name
	// and slug count as actions). Default 100.
	MaxActionsPerJob int
	// MaxInputBytes bounds one action's input as sent. Default 256 KiB.
	MaxInputBytes int
	// JobsRetention is the retention of the jobs topic. A UUIDv7 job id
	// older than this with no result is answered 404: its record has
	// expired unread, so it will never have one. Default 7 days, the jobs
	// topic's default; negative means the topic keeps records forever, so
	// no id expires.
	JobsRetention time.Duration
	// MaxWait caps the ?wait= of a status request; a longer wait is
	// shortened to it. Default 30s.
	MaxWait time.Duration
	// PollInterval is how often the shared poller looks up the jobs that
	// clients wait for. Default 100ms.
	PollInterval time.Duration
	// PollBatch bounds the job ids in one lookup; more waiting jobs are
	// looked up in several per tick. Default 1000.
	PollBatch int
	// ProduceTimeout bounds how long a submit waits for the broker's
	// acknowledgement before answering 503. Default 10s.
	ProduceTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// ShutdownTimeout bounds a graceful Stop when the caller's context has
	// no deadline. Default 30s.
	ShutdownTimeout time.Duration
	// MaxExecutorLag bounds the executor group's backlog in time: while
	// jobs older than this wait unprocessed (kafka.Backlog.Older, from the
	// watcher behind Deps.Backlog, built with this as its MaxAge), or more
	// jobs wait than the group drains in twice this time at its capacity,
	// every submit is answered 429 executor_lag with a Retry-After, nothing
	// produced. Default 300ms; negative: no bound.
	MaxExecutorLag time.Duration
	// MaxExecutorLagRecords bounds the same backlog in jobs (records of the
	// jobs topic), over all partitions, however young: a burst is refused
	// from the job past it. Default 20000; negative: no bound.
	MaxExecutorLagRecords int64
	// ExecutorLagInterval is how often the backlog is measured (the
	// watcher behind Deps.Backlog is built with it); a measurement older
	// than ten intervals and at least five seconds is not acted on, so a
	// broker that cannot be asked does not stop submits. Default 100ms.
	ExecutorLagInterval time.Duration
	// TLS, if not nil, makes the Server serve HTTPS only, with this
	// configuration (internal/certfile builds one from files, reloading the
	// certificate). Default nil: plain HTTP.
	TLS *tls.Config
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.JobsTopic == "" {
		c.JobsTopic = kafka.JobsTopic
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBatchJobs == 0 {
		c.MaxBatchJobs = DefaultMaxBatchJobs
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.MaxActionsPerJob == 0 {
		c.MaxActionsPerJob = DefaultMaxActionsPerJob
	}
	if c.MaxInputBytes == 0 {
		c.MaxInputBytes = DefaultMaxInputBytes
	}
	if c.JobsRetention == 0 {
		c.JobsRetention = DefaultJobsRetention
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.PollBatch == 0 {
		c.PollBatch = DefaultPollBatch
	}
	if c.ProduceTimeout == 0 {
		c.ProduceTimeout = DefaultProduceTimeout
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.MaxExecutorLag == 0 {
		c.MaxExecutorLag = DefaultMaxExecutorLag
	}
	if c.MaxExecutorLagRecords == 0 {
		c.MaxExecutorLagRecords = DefaultMaxExecutorLagRecords
	}
	if c.ExecutorLagInterval == 0 {
		c.ExecutorLagInterval = DefaultExecutorLagInterval
	}
	return c
}

// Validate reports the first setting that cannot work, in a sentence naming
// it. Call it on the result of WithDefaults.
func (c Config) Validate() error {
	if c.JobsTopic == "" {
		return errors.New("ingest jobs topic must not be empty")
	}
	for i, t := range c.BearerTokens {
		if t == "" {
			return fmt.Errorf("ingest bearer token %d is empty; an empty token would let anyone in", i)
		}
	}
	for i, t := range c.ReadTokens {
		if t == "" {
			return fmt.Errorf("ingest read token %d is empty; an empty token would let anyone in", i)
		}
	}
	if c.MaxBodyBytes < 1 {
		return fmt.Errorf("ingest max body bytes must be positive, got %d", c.MaxBodyBytes)
	}
	if c.MaxBodyBytes > record.DefaultMaxSize {
		return fmt.Errorf("ingest max body bytes %d exceeds the %d bytes a job record may have", c.MaxBodyBytes, record.DefaultMaxSize)
	}
	if c.MaxBatchJobs < 1 {
		return fmt.Errorf("ingest max batch jobs must be at least 1, got %d", c.MaxBatchJobs)
	}
	if c.MaxBatchBytes < 1 {
		return fmt.Errorf("ingest max batch bytes must be positive, got %d", c.MaxBatchBytes)
	}
	if c.MaxActionsPerJob < 1 {
		return fmt.Errorf("ingest max actions per job must be at least 1, got %d", c.MaxActionsPerJob)
	}
	if c.MaxInputBytes < 1 {
		return fmt.Errorf("ingest max input bytes must be positive, got %d", c.MaxInputBytes)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"max wait", c.MaxWait}, {"poll interval", c.PollInterval},
		{"produce timeout", c.ProduceTimeout}, {"read header timeout", c.ReadHeaderTimeout},
		{"shutdown timeout", c.ShutdownTimeout}, {"executor lag interval", c.ExecutorLagInterval},
	} {
		if d.v <= 0 {
			return fmt.Errorf("ingest %s must be positive, got %s", d.name, d.v)
		}
	}
	if c.PollBatch < 1 {
		return fmt.Errorf("ingest poll batch must be at least 1, got %d", c.PollBatch)
	}
	return nil
}
