package executor

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/doclog/doclog/executor/place"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultGroup                 = "doclog-executor"
	DefaultMaxPollRecords        = 1000
	DefaultMaxBatchOperations    = 5000
	DefaultMaxRetries            = 5
	DefaultRetryBaseDelay        = 100 * time.Millisecond
	DefaultRetryMaxDelay         = 30 * time.Second
	DefaultConflictBudget        = 100
	DefaultJobTimeout            = 5 * time.Minute
	DefaultDependencyPoll        = 250 * time.Millisecond
	DefaultMaxParkedPerPartition = 10000
	DefaultStoreTimeout          = 30 * time.Second
	DefaultProduceTimeout        = 30 * time.Second
	DefaultShutdownTimeout       = 30 * time.Second
	DefaultLoadConcurrency       = 8
	DefaultOffsetCommitInterval  = 100 * time.Millisecond
	// DefaultRebalanceTimeout and DefaultFetchMaxWait are franz-go's own.
	DefaultRebalanceTimeout = time.Minute
	DefaultFetchMaxWait     = 5 * time.Second
)

// DefaultKeyframeInterval is the model's: the keyframe rule has one owner
// (model.KeyframeDue), so the executor cannot drift from the tools that
// rebuild and validate keyframes.
const DefaultKeyframeInterval = model.DefaultKeyframeInterval

// Config configures an Executor. The zero value of each optional field means
// its default; call WithDefaults, then Validate (New does both).
type Config struct {
	// Store is the operation log. Required.
	Store oplog.Store
	// Registry holds the document models this member can reduce. Required.
	Registry *model.Registry
	// Cache holds stream heads between batches. Default: a write cache over
	// Store (executor/cache) with KeyframeInterval.
	Cache StreamCache

	// Kafka reaches the cluster. Seeds are required.
	Kafka kafka.Config
	// Topics names the jobs, write-ready and dead-letter topics. Default:
	// kafka.TopicNames("").
	Topics kafka.Topics
	// Group is the consumer group of the executors. Default
	// "doclog-executor".
	Group string
	// SessionTimeout and HeartbeatInterval tune the group membership; zero
	// keeps Kafka.Membership's (10s, 1s). Tests shorten them for fast
	// rebalances.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// RebalanceTimeout is how long the group waits for its members to
	// rejoin a rebalance, which a member does once its in-flight batch is
	// settled. Default 1m.
	RebalanceTimeout time.Duration
	// FetchMaxWait bounds how long a broker holds a fetch that has no data.
	// Default 5s.
	FetchMaxWait time.Duration
	// MaxPollRecords bounds the records taken per poll, and so the size of
	// a batch. Default 1000.
	MaxPollRecords int
	// MaxBatchOperations bounds the operations one batch carries (a job's
	// actions, a load job's operations), so that a batch of large jobs
	// does not hold the jobs behind it for seconds: the jobs past it wait
	// for the next batch, which starts at once. A job larger than the
	// bound goes alone. Default 5000.
	MaxBatchOperations int
	// MaxRecordBytes bounds a job record's value; a larger one is dead
	// lettered as RECORD_TOO_LARGE. Default 1 MiB (record.DefaultMaxSize).
	MaxRecordBytes int
	// InlineOperationsBytes bounds a write-ready record that carries its
	// operations; past it they are left out. Default
	// record.DefaultInlineOperationsBytes.
	InlineOperationsBytes int

	// Signatures, when set, checks the signatures of every job's actions
	// as it is admitted; a job it refuses ends FAILED (SIGNATURE_INVALID)
	// with nothing stored. Default: none, signatures are stored unchecked.
	Signatures SignatureVerifier

	// KeyframeInterval: an append carries a keyframe for a stream whenever
	// its revision crosses a multiple of it, one more interval apart for
	// every model.KeyframeBytes of the stream's state (model.KeyframeDue).
	// Default 10.
	KeyframeInterval int64
	// MaxSkipThreshold bounds how many stored operations placing a job by
	// timestamp (a load job, or a job of a model that asks for it) may
	// supersede; a placement reaching further back fails the job
	// EXCESSIVE_SHUFFLE. Default place.DefaultMaxSkipThreshold (1000).
	MaxSkipThreshold int64
	// MaxRetries is the number of retries after transient errors for a job
	// that does not set its own maxRetries. Conflicts and unavailability
	// never count. Default 5; for none, set NoRetries.
	MaxRetries int
	// NoRetries makes MaxRetries 0: a job that sets no maxRetries of its
	// own fails at its first transient error. It is a field of its own so
	// that a zero MaxRetries keeps meaning the default; MaxRetries must
	// then be 0.
	NoRetries bool
	// RetryBaseDelay and RetryMaxDelay bound the exponential backoff between
	// retries (and between attempts to reach an unavailable dependency).
	// Defaults 100ms and 30s.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	// ConflictBudget bounds how many times a job may lose a conflict (a
	// concurrent writer moved its streams) before it fails with
	// CONFLICT_BUDGET_EXHAUSTED. Conflicts do not count against MaxRetries.
	// Default 100.
	ConflictBudget int
	// JobTimeout bounds how long a job may wait in this member for reasons
	// of its own: a queueHint dependency that does not complete (TIMEOUT),
	// a document model this member does not know (UNKNOWN_DOCUMENT_TYPE).
	// Time during which Postgres or Kafka is unavailable does not count.
	// Default 5m.
	JobTimeout time.Duration
	// DependencyPoll is how often a job parked on its queueHint looks its
	// dependencies up again. Default 250ms.
	DependencyPoll time.Duration
	// MaxParkedPerPartition: a partition holding this many unsettled records
	// stops fetching until some settle. Default 10000.
	MaxParkedPerPartition int
	// LoadConcurrency bounds how many streams are loaded from the log at
	// once. Default 8.
	LoadConcurrency int
	// StoreTimeout bounds one call to the Store. Default 30s.
	StoreTimeout time.Duration
	// ProduceTimeout bounds producing a batch's records; at least 1s.
	// Default 30s.
	ProduceTimeout time.Duration
	// ShutdownTimeout bounds finishing the in-flight batch after Stop is
	// called. Default 30s.
	ShutdownTimeout time.Duration
	// OffsetCommitInterval is how often, at most, the loop commits the
	// offsets of the jobs it announced; a member that stops, and a
	// partition being revoked, commit at once. An offset only bounds
	// re-delivery (a job read again is found settled and re-announced), so
	// committing after every poll would cost each poll a round trip to the
	// group coordinator and the broker a write per poll. Default 100ms.
	OffsetCommitInterval time.Duration
	// AsyncAnnounce produces a batch's announcements without waiting for
	// the brokers' acknowledgements before the next batch: the loop looks
	// up, reduces and appends the next batch while they are in flight, and
	// commits the offsets past a job once its announcement is acknowledged,
	// as it does waiting. Where each produce costs the round trips of a
	// replicated write (acks=all on three brokers over links of a
	// millisecond: about 14 ms a batch, two thirds of the loop), waiting
	// held the loop idle; on one local broker it saves little. A failed
	// produce is retried as before, after an outage's backoff. Default
	// false: the loop waits.
	AsyncAnnounce bool

	// Logger receives the executor's logs, unnamed (the caller names it);
	// franz-go's go to its "kafka" child. Default: none.
	Logger *zap.Logger
	// Registerer receives the executor's metrics (doclog_executor_*).
	// Default: a private registry.
	Registerer prometheus.Registerer

	// afterAppend, when set, runs after each successful Store.Append and
	// before anything is produced. A non-nil error stops the member at once,
	// as a crash would: nothing is produced, no offset is committed, and Err
	// returns the error. Fault-injection tests set it (export_test.go); it
	// is no setting of a deployment.
	afterAppend func() error
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Topics == (kafka.Topics{}) {
		c.Topics = kafka.TopicNames("")
	}
	setDefault(&c.Group, DefaultGroup)
	setDefault(&c.MaxPollRecords, DefaultMaxPollRecords)
	setDefault(&c.MaxBatchOperations, DefaultMaxBatchOperations)
	setDefault(&c.OffsetCommitInterval, DefaultOffsetCommitInterval)
	setDefault(&c.RebalanceTimeout, DefaultRebalanceTimeout)
	setDefault(&c.FetchMaxWait, DefaultFetchMaxWait)
	setDefault(&c.MaxRecordBytes, record.DefaultMaxSize)
	setDefault(&c.InlineOperationsBytes, record.DefaultInlineOperationsBytes)
	setDefault(&c.KeyframeInterval, DefaultKeyframeInterval)
	setDefault(&c.MaxSkipThreshold, place.DefaultMaxSkipThreshold)
	if !c.NoRetries {
		setDefault(&c.MaxRetries, DefaultMaxRetries)
	}
	setDefault(&c.RetryBaseDelay, DefaultRetryBaseDelay)
	setDefault(&c.RetryMaxDelay, DefaultRetryMaxDelay)
	setDefault(&c.ConflictBudget, DefaultConflictBudget)
	setDefault(&c.JobTimeout, DefaultJobTimeout)
	setDefault(&c.DependencyPoll, DefaultDependencyPoll)
	setDefault(&c.MaxParkedPerPartition, DefaultMaxParkedPerPartition)
	setDefault(&c.LoadConcurrency, DefaultLoadConcurrency)
	setDefault(&c.StoreTimeout, DefaultStoreTimeout)
	setDefault(&c.ProduceTimeout, DefaultProduceTimeout)
	setDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&c.Logger, zap.NewNop())
	return c
}

// setDefault sets *field to def when it holds its zero value.
func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Validate reports the first setting that cannot work, in a sentence naming
// it. Call it on the result of WithDefaults.
func (c Config) Validate() error {
	if c.Store == nil {
		return errors.New("executor store is required")
	}
	if c.Registry == nil {
		return errors.New("executor model registry is required")
	}
	if err := c.Kafka.WithDefaults().Validate(); err != nil {
		return fmt.Errorf("executor kafka config: %w", err)
	}
	if c.Topics.Jobs == "" || c.Topics.WriteReady == "" || c.Topics.DeadLetters == "" {
		return errors.New("executor topics must name the jobs, write-ready and dead-letter topics")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		// zeroOK: zero keeps franz-go's default.
		zeroOK bool
	}{
		{"retry base delay", c.RetryBaseDelay, false}, {"retry max delay", c.RetryMaxDelay, false},
		{"job timeout", c.JobTimeout, false}, {"dependency poll", c.DependencyPoll, false},
		{"store timeout", c.StoreTimeout, false}, {"produce timeout", c.ProduceTimeout, false},
		{"shutdown timeout", c.ShutdownTimeout, false}, {"offset commit interval", c.OffsetCommitInterval, false},
		{"session timeout", c.SessionTimeout, true}, {"rebalance timeout", c.RebalanceTimeout, true},
		{"heartbeat interval", c.HeartbeatInterval, true}, {"fetch max wait", c.FetchMaxWait, true},
	} {
		if d.v < 0 || d.v == 0 && !d.zeroOK {
			return fmt.Errorf("executor %s must be positive, got %s", d.name, d.v)
		}
	}
	if c.ProduceTimeout < time.Second {
		// franz-go refuses a record delivery timeout below a second.
		return fmt.Errorf("executor produce timeout must be at least 1s, got %s", c.ProduceTimeout)
	}
	if c.RetryMaxDelay < c.RetryBaseDelay {
		return fmt.Errorf("executor retry max delay %s is below the base delay %s", c.RetryMaxDelay, c.RetryBaseDelay)
	}
	if c.Group == "" {
		return errors.New("executor consumer group must not be empty")
	}
	if c.NoRetries && c.MaxRetries != 0 {
		return fmt.Errorf("executor NoRetries contradicts max retries %d", c.MaxRetries)
	}
	for _, n := range []struct {
		name   string
		v, min int64
	}{
		{"max poll records", int64(c.MaxPollRecords), 1}, {"max batch operations", int64(c.MaxBatchOperations), 1},
		{"max record bytes", int64(c.MaxRecordBytes), 1},
		{"inline operations bytes", int64(c.InlineOperationsBytes), 1}, {"keyframe interval", c.KeyframeInterval, 1},
		{"max skip threshold", c.MaxSkipThreshold, 1},
		{"max retries", int64(c.MaxRetries), 0}, {"conflict budget", int64(c.ConflictBudget), 1},
		{"max parked records per partition", int64(c.MaxParkedPerPartition), 1}, {"load concurrency", int64(c.LoadConcurrency), 1},
	} {
		if n.v < n.min {
			return fmt.Errorf("executor %s must be at least %d, got %d", n.name, n.min, n.v)
		}
	}
	return nil
}
