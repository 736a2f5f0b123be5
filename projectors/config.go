package projectors

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// Defaults of Config.
const (
	DefaultMaxPollRecords    = 500
	DefaultHeadCacheBytes    = 64 << 20
	DefaultReconcileInterval = 30 * time.Second
	DefaultReconcilePageSize = 500
	// DefaultOffsetCommitInterval: see Config.OffsetCommitInterval.
	DefaultOffsetCommitInterval = time.Second
	DefaultRetryBaseDelay       = 100 * time.Millisecond
	DefaultRetryMaxDelay        = 10 * time.Second
	DefaultGroupPrefix          = "doclog-"
	// DefaultRebalanceTimeout and DefaultFetchMaxWait are franz-go's own.
	DefaultRebalanceTimeout = time.Minute
	DefaultFetchMaxWait     = 5 * time.Second
)

// Config configures one projector's Runner.
type Config struct {
	// Projector is the projector the runner drives. Required.
	Projector Projector
	// Store holds checkpoints, stream heads and quarantines, and runs the
	// batch transactions the projector writes in. Required.
	Store Store
	// Log is the operation log, read to heal gaps, operations a record left
	// out, and streams the reconciler finds behind. Required.
	Log oplog.Store
	// Registry holds the models streams are replayed with. Required.
	Registry *model.Registry

	// Kafka reaches the brokers. Required (its Seeds).
	Kafka kafka.Config
	// Topic is the write-ready topic. Default kafka.TopicNames("").WriteReady
	// ("doclog.write-ready").
	Topic string
	// Group is the consumer group. Default "doclog-" + the projector's name,
	// so every projector is its own group and adding one touches no other.
	Group string
	// KafkaOptions are extra client options appended last (session timeout,
	// fetch sizes), so they win over the fields below. Default none.
	KafkaOptions []kgo.Opt
	// RebalanceTimeout is how long the group waits for its members to
	// rejoin a rebalance, which a member does once its in-flight batch is
	// committed. Default 1m.
	RebalanceTimeout time.Duration
	// FetchMaxWait bounds how long a broker holds a fetch that has no data.
	// Default 5s (the analytics projector sets its own, its batch delay).
	FetchMaxWait time.Duration

	// Start is where the projector reads a partition it has no checkpoint
	// for: the start of the topic (default), its end, or a time (see
	// StartPosition for what the projection then holds). A projector whose
	// readers expect every document (FullHistory) refuses anything else.
	Start StartPosition

	// MaxPollRecords bounds the records of one poll, which is one batch
	// transaction. Default 500.
	MaxPollRecords int
	// HeadCacheBytes bounds the verified stream states the runner keeps
	// between batches, in bytes of canonical JSON (a held state takes
	// about five times as much Go heap), so a batch need not read back and
	// decode the state the runner wrote last. Default 64 MiB, the
	// executor's write cache's bound: a cache smaller than the documents
	// in play misses on every batch (an LRU cycled through a working set a
	// little larger than itself), and each miss decodes and re-encodes the
	// whole state; 32 documents of 1 MB with 8 MiB ran at 93–112
	// operations/s, with 64 MiB at 111–122. Negative disables it.
	HeadCacheBytes int64
	// ReconcileInterval is how often the reconciler compares the log's
	// stream heads with the projection (a first pass runs at Start).
	// It is what heals a lost last record of a document, which no later
	// record reveals. Default 30s; negative disables it (tests that want a
	// deterministic pass call Reconcile).
	ReconcileInterval time.Duration
	// OffsetCommitInterval is how often the Kafka offsets of the committed
	// batches are committed to the group. They only feed lag tools (the
	// checkpoint in Postgres is what a partition's next owner seeks to), so
	// committing them once per poll would only load the broker: each commit
	// is a write to __consumer_offsets. Lag tools see offsets at most this
	// old. Default 1s.
	OffsetCommitInterval time.Duration
	// ReconcilePageSize is how many documents one reconciler step compares.
	// Default 500.
	ReconcilePageSize int
	// RetryBaseDelay and RetryMaxDelay bound the exponential backoff of a
	// batch that failed for a reason other than its records (the database
	// is unreachable): the batch is retried, never skipped. Defaults 100ms
	// and 10s.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration

	// SharedDecode, when set, is shared by the runners of this process that
	// consume the same topic, so that each write-ready record is decoded
	// once between them. Default: each runner decodes what it consumes.
	SharedDecode *SharedDecode

	// Logger receives the runner's logs. Default: none.
	Logger *zap.Logger
	// Registerer receives the runner's metrics. Default: a private registry
	// (the metrics are then only read through Status).
	Registerer prometheus.Registerer
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Topic == "" {
		c.Topic = kafka.TopicNames("").WriteReady
	}
	if c.Group == "" && c.Projector != nil {
		c.Group = DefaultGroupPrefix + c.Projector.Name()
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = DefaultMaxPollRecords
	}
	if c.HeadCacheBytes == 0 {
		c.HeadCacheBytes = DefaultHeadCacheBytes
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	if c.OffsetCommitInterval == 0 {
		c.OffsetCommitInterval = DefaultOffsetCommitInterval
	}
	if c.ReconcilePageSize == 0 {
		c.ReconcilePageSize = DefaultReconcilePageSize
	}
	if c.RetryBaseDelay == 0 {
		c.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if c.RetryMaxDelay == 0 {
		c.RetryMaxDelay = DefaultRetryMaxDelay
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = DefaultFetchMaxWait
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

// Validate reports the first setting that cannot work. Call it on the result
// of WithDefaults.
func (c Config) Validate() error {
	switch {
	case c.Projector == nil:
		return errors.New("projector runner needs a projector")
	case c.Projector.Name() == "":
		return errors.New("projector name must not be empty")
	case c.Projector.Filter().Validate() != nil:
		return fmt.Errorf("projector %s: %w", c.Projector.Name(), c.Projector.Filter().Validate())
	case c.Store == nil:
		return errors.New("projector runner needs a store for checkpoints and heads")
	case c.Log == nil:
		return errors.New("projector runner needs the operation log to heal from")
	case c.Registry == nil:
		return errors.New("projector runner needs a model registry to verify hashes with")
	case c.Topic == "":
		return errors.New("projector write-ready topic must not be empty")
	case c.Group == "":
		return errors.New("projector consumer group must not be empty")
	case !c.Start.Earliest() && needsFullHistory(c.Projector):
		return fmt.Errorf("projector %s starts at the beginning of the log, not %s: its readers expect every document, and one nobody touched since the start would be missing", c.Projector.Name(), c.Start)
	case c.MaxPollRecords < 1:
		return fmt.Errorf("projector max poll records must be at least 1, got %d", c.MaxPollRecords)
	case c.OffsetCommitInterval < 0:
		return fmt.Errorf("projector offset commit interval must not be negative, got %s", c.OffsetCommitInterval)
	case c.ReconcilePageSize < 1:
		return fmt.Errorf("projector reconcile page size must be at least 1, got %d", c.ReconcilePageSize)
	case c.RetryBaseDelay <= 0 || c.RetryMaxDelay < c.RetryBaseDelay:
		return fmt.Errorf("projector retry delays must be positive with the maximum (%s) at least the base (%s)", c.RetryMaxDelay, c.RetryBaseDelay)
	case c.RebalanceTimeout < 100*time.Millisecond:
		// franz-go's lower bounds.
		return fmt.Errorf("projector rebalance timeout must be at least 100ms, got %s", c.RebalanceTimeout)
	case c.FetchMaxWait < 10*time.Millisecond:
		return fmt.Errorf("projector fetch max wait must be at least 10ms, got %s", c.FetchMaxWait)
	}
	if err := c.Kafka.WithDefaults().Validate(); err != nil {
		return fmt.Errorf("projector %s: %w", c.Projector.Name(), err)
	}
	return nil
}
