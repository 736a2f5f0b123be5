// Package executor owns doclog's write path between the jobs topic and the
// operation log: a consumer group on doclog.jobs whose members
// decode each polled batch, look the batch's job ids up in the log (a job
// that already has a result is re-announced, never reduced again), load each
// document's stream heads from the write cache, run the reducers action by
// action, and commit the whole batch with one conditional Store.Append that
// also writes the job results. Only then does it produce one write-ready
// record per committed job (and a dead letter per failed one), wait for the
// acknowledgements, and commit the Kafka offsets. A crash anywhere in between
// leads to re-delivery, which the job-id lookup turns into a
// re-announcement, so every committed job reaches the write-ready topic at
// least once, in per-document order, without an outbox table. With
// Config.AsyncAnnounce the loop does not wait for the acknowledgements
// before the next batch (the offsets still wait for them), and a record
// produced again after a failure may follow a later job's.
//
// Failures are accounted by cause, and only the job's own count against
// its retries: a reducer error or panic fails the job (FAILED, written
// under the same head guard as the batch's operations); a conflict reloads
// and retries, exempt from the retry limit but bounded by a conflict budget;
// an unavailable Postgres or Kafka pauses fetching, fails Ready and retries
// without limit; other transient errors back off exponentially and count
// against maxRetries; a document model this member does not know waits,
// since a rolling upgrade may be bringing it in.
//
// One goroutine runs the loop; its state (the records of each partition
// that are not settled yet) is touched otherwise only by the rebalance
// callbacks, which franz-go runs between polls (BlockRebalanceOnPoll).
package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/doclog/doclog/executor/cache"
	"github.com/doclog/doclog/executor/reduce"
	"github.com/doclog/doclog/internal/lifecycle"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// StreamCache holds stream head states between batches. *cache.Cache
// implements it; the executor declares only what it uses.
type StreamCache interface {
	// LoadShared returns a stream's head, rebuilding it from the log on a
	// miss; documentType names the type of an empty stream. The head may be
	// the cache's own: the executor copies a stream before a job changes
	// it, and never changes the head it was given.
	LoadShared(ctx context.Context, partition int32, stream oplog.StreamKey, documentType string) (*model.StreamState, error)
	// Put makes st the stream's head after an append committed it; the
	// cache takes st over.
	Put(partition int32, st *model.StreamState)
	// Invalidate drops a stream after an append lost a conflict on it.
	Invalidate(stream oplog.StreamKey)
	// DropPartition drops every stream a partition loaded (on revoke).
	DropPartition(partition int32) int
}

// Executor is one member of the executor group. Create it with New, start it
// with Start, stop it with Stop.
type Executor struct {
	cfg     Config
	log     *zap.Logger
	cl      *kgo.Client
	cache   StreamCache
	decoder record.Decoder
	reducer *reduce.Reducer
	m       *metrics

	// mu guards the loop's state below. The loop holds it while it
	// processes a poll; the rebalance callbacks take it to drop partitions.
	mu    sync.Mutex
	parts map[int32]*partition
	// woken is set when something happened since the loop last looked
	// that it must act on without new records (wake): with AsyncAnnounce,
	// a job's announcement was acknowledged, so the offsets may move past
	// it; or an offset commit failed, to be sent again. pollCancel, under
	// pollMu, ends the poll in progress for it.
	woken      atomic.Bool
	pollMu     sync.Mutex
	pollCancel context.CancelFunc
	// inFlight counts the announcement records produced and not yet
	// acknowledged or failed, for the stop to wait for; announceErr is the
	// last failure, reported while its jobs are produced again.
	inFlight    sync.WaitGroup
	announceErr error
	// lastCommit is when the loop last committed offsets. commitsInFlight
	// counts the loop's commits not answered yet; commitFailed is set when
	// one failed, for the loop to send the offsets again.
	lastCommit      time.Time
	commitsInFlight atomic.Int32
	commitFailed    atomic.Bool
	// Unavailability: when it began, the last error, how often the retry
	// failed and when to retry next.
	outageSince    time.Time
	outageErr      error
	outageAttempts int
	outageRetryAt  time.Time
	// The broker as the consumer sees it (watchBroker): unreachable since,
	// why, and when a ping last checked.
	brokerDownSince time.Time
	brokerErr       error
	brokerPingedAt  time.Time
	// start and unavailable make the clock job timeouts are measured on:
	// time during which a dependency was unavailable does not count.
	start       time.Time
	unavailable time.Duration
	// paused is the set of pauses the member obeys (pause.go).
	paused pauses
	// firstPart rotates the partition a batch is gathered from first,
	// once a batch was cut short by MaxBatchOperations.
	firstPart int

	readyMu  sync.Mutex
	readyErr error

	life lifecycle.Lifecycle
	// stopCtx ends at Stop; set by Start, read by the loop.
	stopCtx context.Context
}

// New validates the configuration and creates the member's Kafka client.
// It does not join the group until Start.
func New(cfg Config) (*Executor, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Executor{
		cfg:      cfg,
		log:      cfg.Logger,
		cache:    cfg.Cache,
		decoder:  record.Decoder{MaxBytes: cfg.MaxRecordBytes},
		reducer:  &reduce.Reducer{Registry: cfg.Registry, KeyframeInterval: cfg.KeyframeInterval, Logger: cfg.Logger, MaxSkipThreshold: cfg.MaxSkipThreshold},
		parts:    map[int32]*partition{},
		readyErr: ErrNotRunning,
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register executor metrics: %w", err)
	}
	e.m = m
	if e.cache == nil {
		c, err := cache.New(cfg.Store, cfg.Registry, cache.Config{KeyframeInterval: cfg.KeyframeInterval})
		if err != nil {
			return nil, fmt.Errorf("create write cache: %w", err)
		}
		e.cache = c
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics.Jobs),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) { e.drop(ctx, "revoked", m) }),
		kgo.OnPartitionsLost(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) { e.drop(ctx, "lost", m) }),
		// Announcements may be produced twice (a re-announcement is one
		// anyway), so the idempotent producer buys nothing here, and it
		// would keep a record whose outcome is unknown in flight until the
		// broker answers: a produce could then outlast ProduceTimeout, and
		// the member could neither report the outage nor stop. One request
		// in flight per broker keeps each document's records in order
		// across retries.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.MaxProduceRequestsInflightPerBroker(1),
		kgo.RecordDeliveryTimeout(cfg.ProduceTimeout),
		kgo.ProducerBatchMaxBytes(int32(record.DefaultMaxSize + 64<<10)),
	}
	if cfg.AsyncAnnounce {
		// Waiting, the loop's ProduceSync sends at once; produced without
		// waiting, a batch's announcements would otherwise linger 10 ms.
		// One request in flight per broker still gathers what comes
		// meanwhile into the next request.
		opts = append(opts, kgo.ProducerLinger(0))
	}
	opts = append(opts, cfg.Kafka.Membership.GroupOptions()...)
	if cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(cfg.SessionTimeout))
	}
	if cfg.RebalanceTimeout > 0 {
		opts = append(opts, kgo.RebalanceTimeout(cfg.RebalanceTimeout))
	}
	if cfg.HeartbeatInterval > 0 {
		opts = append(opts, kgo.HeartbeatInterval(cfg.HeartbeatInterval))
	}
	if cfg.FetchMaxWait > 0 {
		opts = append(opts, kgo.FetchMaxWait(cfg.FetchMaxWait))
	}
	cl, err := kafka.NewClient(cfg.Kafka, cfg.Logger, opts...)
	if err != nil {
		return nil, fmt.Errorf("create executor: %w", err)
	}
	e.cl = cl
	return e, nil
}

// Ready reports whether the member is doing its work, for /readyz: nil
// while it runs with its dependencies reachable, *UnavailableError while
// Postgres or Kafka cannot be reached, ErrNotRunning before Start and once
// the member stopped.
func (e *Executor) Ready() error {
	e.readyMu.Lock()
	defer e.readyMu.Unlock()
	return e.readyErr
}

func (e *Executor) setReady(err error) {
	e.readyMu.Lock()
	e.readyErr = err
	e.readyMu.Unlock()
}

// Start joins the group and consumes jobs in a goroutine of its own, and
// returns at once; ctx bounds the start only. It fails when the member was
// started or stopped before.
//
// The member runs until Stop, or until a fatal error stops it on its own
// (only the after-append test hook's, today): then Done is closed, Err
// returns the error, and the member, as a crash would, commits nothing and
// does not leave the group.
func (e *Executor) Start(ctx context.Context) error {
	err := e.life.Start(ctx, func(stop context.Context) (func() error, error) {
		e.stopCtx = stop
		e.start = time.Now()
		e.setReady(nil)
		e.log.Info("executor started", zap.String("group", e.cfg.Group), zap.String("topic", e.cfg.Topics.Jobs), zap.Bool("async_announce", e.cfg.AsyncAnnounce))
		return e.run, nil
	})
	if err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	return nil
}

// Stop stops consuming, finishes the in-flight batch (within
// ShutdownTimeout), commits its offsets and leaves the group, and waits for
// all that, or for ctx to end (then it returns ctx's error and the member
// goes on stopping). Stopping twice, or a member never started (whose
// client it closes), is harmless. Stop does not return the fatal error of
// a member that stopped on its own: Err does.
func (e *Executor) Stop(ctx context.Context) error {
	if err := e.life.Stop(ctx, e.cl.Close); err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	return nil
}

// Done is closed once the member has stopped, after Stop or on a fatal
// error.
func (e *Executor) Done() <-chan struct{} { return e.life.Done() }

// Err is the fatal error that stopped the member on its own, once Done is
// closed; nil after a Stop, and while it runs.
func (e *Executor) Err() error { return e.life.Err() }

// run consumes until the stop, then finishes the in-flight batch, commits
// its offsets and leaves the group. It returns nil after a stop, the
// hook's error after a crash.
func (e *Executor) run() error {
	// The in-flight batch finishes with its own context, which ends only
	// ShutdownTimeout after the stop: a stop must not abort an append.
	work, cancelWork := context.WithCancel(context.Background())
	defer cancelWork()
	var timer *time.Timer
	var timerMu sync.Mutex
	stopTimer := context.AfterFunc(e.stopCtx, func() {
		timerMu.Lock()
		timer = time.AfterFunc(e.cfg.ShutdownTimeout, cancelWork)
		timerMu.Unlock()
	})
	defer func() {
		stopTimer()
		timerMu.Lock()
		if timer != nil {
			timer.Stop()
		}
		timerMu.Unlock()
	}()
	defer e.setReady(ErrNotRunning)

	err := e.loop(work)
	var crash *crashError
	if errors.As(err, &crash) {
		e.log.Warn("executor stopped by the after-append hook", zap.Error(crash.err))
		e.cl.Close()
		return crash.err
	}
	e.mu.Lock()
	if ferr := e.flush(work); ferr != nil {
		e.log.Warn("final flush failed; the records will be re-delivered", zap.Error(ferr))
	}
	if e.cfg.AsyncAnnounce {
		// The announcements in flight settle (or time out) before the
		// last commit, so that it moves past every job announced.
		if werr := e.awaitAnnouncements(work); werr != nil {
			e.log.Warn("announcements still in flight at the stop; their jobs will be re-delivered", zap.Error(werr))
		}
	}
	e.commit(work, true, nil)
	e.mu.Unlock()
	e.cl.Close()
	if lerr := kafka.Leave(work, e.cfg.Kafka, e.cfg.Group, e.log); lerr != nil {
		e.log.Warn("could not leave the group: the partitions move when the session times out", zap.Error(lerr))
	}
	e.log.Info("executor stopped")
	return err
}
