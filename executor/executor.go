// Package executor owns doclog's write path between the jobs topic and the
// operation log (DESIGN §6): a consumer group on doclog.jobs whose members
// decode each polled batch, look the batch's job ids up in the log (a job
// that already has a result is re-announced, never reduced again), load each
// document's stream heads from the write cache, run the reducers action by
// action, and commit the whole batch with one conditional Store.Append that
// also writes the job results. Only then does it produce one write-ready
// record per committed job (and a dead letter per failed one), wait for the
// acknowledgements, and commit the Kafka offsets. A crash anywhere in between
// leads to re-delivery, which the job-id lookup turns into a
// re-announcement, so every committed job reaches the write-ready topic at
// least once, in per-document order, without an outbox table.
//
// Failures are accounted as the reference reactor does (seed 001,
// RetryAccounting): a reducer error or panic fails the job (FAILED, written
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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/doclog/doclog/executor/cache"
	"github.com/doclog/doclog/internal/backoff"
	"github.com/doclog/doclog/internal/kafka"
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
// with Run, stop it by cancelling Run's context or with Close.
type Executor struct {
	cfg     Config
	log     *zap.Logger
	cl      *kgo.Client
	cache   StreamCache
	decoder record.Decoder
	m       *metrics

	// mu guards the loop's state below. The loop holds it while it
	// processes a poll; the rebalance callbacks take it to drop partitions.
	mu    sync.Mutex
	parts map[int32]*partition
	// lastCommit is when the loop last committed offsets.
	lastCommit time.Time
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

	readyMu  sync.Mutex
	readyErr error

	started   atomic.Bool
	stopCtx   context.Context
	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// partition is the loop's view of one assigned partition of the jobs topic.
type partition struct {
	id    int32
	topic string
	// jobs are the records polled and not yet settled and announced, in
	// offset order. The committed offset never passes the first of them.
	jobs []*pending
	// last is the last record polled, whose offset+1 is committed once
	// nothing before it is pending.
	last      *kgo.Record
	committed int64
	paused    bool
}

// pending is one polled record on its way to being settled.
type pending struct {
	rec *kgo.Record
	job *record.Job // nil for a record that did not decode
	// seen is when the record was polled, on the executor's clock.
	seen time.Duration
	// attempts counts transient failures (against maxRetries); conflicts
	// counts lost conflicts (against the conflict budget); waits counts
	// uncounted waits (model, dependency) for their backoff.
	attempts, conflicts, waits int
	notBefore                  time.Time
	// waiting says what a parked job waits for, for its timeout.
	waiting string
	waitErr error
	history []oplog.ErrorInfo
	// fail is a decided failure (retries or budget exhausted, timeout,
	// failed dependency): the next attempt writes FAILED without reducing.
	fail error
	// After the log refused a request whatever the state of its streams
	// (see settle): alone puts the job in a batch as its document's only
	// one, so a refusal names the job that causes it; bare writes its
	// FAILED verdict with no stream in the request, guarded by the job id
	// alone, for when the log refused even the guarded verdict. refusals
	// counts them, for the backoff.
	alone, bare bool
	refusals    int
	// undecodable is the dead letter of a record that did not decode but
	// whose job id could be read: it is settled FAILED like a job, and
	// announced with this dead letter, which carries the raw record.
	undecodable *record.DeadLetter
	// settled: the outcome is in the log (or the record was dead-lettered)
	// and out holds the records that announce it.
	settled bool
	out     []*kgo.Record
}

func (p *pending) documentID() string { return p.job.DocumentID }

// walk calls fn for the unsettled jobs of the partition in order, per
// document until fn returns false: a document's later jobs never overtake
// an earlier one that waits.
func (ps *partition) walk(fn func(p *pending) bool) {
	blocked := map[string]bool{}
	for _, p := range ps.jobs {
		if p.settled || p.job == nil || blocked[p.documentID()] {
			continue
		}
		if !fn(p) {
			blocked[p.documentID()] = true
		}
	}
}

// New validates the configuration and creates the member's Kafka client.
// It does not join the group until Run.
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
		parts:    map[int32]*partition{},
		readyErr: ErrNotRunning,
		done:     make(chan struct{}),
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
	e.stopCtx, e.stop = context.WithCancel(context.Background())
	return e, nil
}

// Ready reports whether the member is doing its work, for /readyz: nil
// while it runs with its dependencies reachable, *UnavailableError while
// Postgres or Kafka cannot be reached, ErrNotRunning outside Run.
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

// Run consumes jobs until ctx ends or Close is called, then finishes the
// in-flight batch (within ShutdownTimeout), commits its offsets and leaves
// the group. It returns nil after such a stop; it may be called once.
func (e *Executor) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("executor run: already started")
	}
	defer close(e.done)
	if e.stopCtx.Err() != nil {
		e.cl.Close()
		return nil
	}
	stopWatch := context.AfterFunc(ctx, e.stop)
	defer stopWatch()
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

	e.start = time.Now()
	e.setReady(nil)
	defer e.setReady(ErrNotRunning)
	e.log.Info("executor started", zap.String("group", e.cfg.Group), zap.String("topic", e.cfg.Topics.Jobs))

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
	e.commit(work, true, nil)
	e.mu.Unlock()
	e.cl.Close()
	if lerr := kafka.Leave(work, e.cfg.Kafka, e.cfg.Group, e.log); lerr != nil {
		e.log.Warn("could not leave the group: the partitions move when the session times out", zap.Error(lerr))
	}
	e.log.Info("executor stopped")
	return err
}

// Close stops Run and waits for it to return (or closes the client if Run
// never started). Calling it more than once is harmless.
func (e *Executor) Close() {
	e.closeOnce.Do(func() {
		e.stop()
		if !e.started.CompareAndSwap(false, true) {
			<-e.done
			return
		}
		close(e.done)
		e.cl.Close()
	})
}

// loop polls and processes until the stop, returning only a crash error.
func (e *Executor) loop(work context.Context) error {
	for e.stopCtx.Err() == nil {
		e.mu.Lock()
		wake := e.nextWake(time.Now())
		e.mu.Unlock()
		pollCtx, cancel := e.stopCtx, context.CancelFunc(func() {})
		if !wake.IsZero() {
			pollCtx, cancel = context.WithDeadline(e.stopCtx, wake)
		}
		fetches := e.cl.PollRecords(pollCtx, e.cfg.MaxPollRecords)
		cancel()
		if fetches.IsClientClosed() {
			return nil
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				e.log.Warn("fetch error", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
				fetchErr = err
			}
		})
		e.mu.Lock()
		e.watchBroker(work, fetchErr, time.Now())
		err := e.iterate(work, fetches.Records())
		e.mu.Unlock()
		e.cl.AllowRebalance()
		if err != nil {
			return err
		}
	}
	return nil
}

// nextWake is when the loop must look at its pending records again even if
// nothing new arrives; zero means only new records (or the stop) wake it.
func (e *Executor) nextWake(now time.Time) time.Time {
	if !e.outageSince.IsZero() {
		return e.outageRetryAt
	}
	var wake time.Time
	if e.uncommitted() {
		wake = e.lastCommit.Add(e.cfg.OffsetCommitInterval)
	}
	if !e.brokerDownSince.IsZero() {
		if t := e.brokerPingedAt.Add(brokerPingInterval); wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	for _, ps := range e.parts {
		ps.walk(func(p *pending) bool {
			t := p.notBefore
			if t.Before(now) {
				t = now
			}
			if wake.IsZero() || t.Before(wake) {
				wake = t
			}
			return false
		})
	}
	return wake
}

// clock is the executor's clock for job timeouts: time since Run started
// minus the time a dependency was unavailable.
func (e *Executor) clock(now time.Time) time.Duration {
	c := now.Sub(e.start) - e.unavailable
	if !e.outageSince.IsZero() {
		c -= now.Sub(e.outageSince)
	}
	return c
}

// backoff is the exponential delay before retry n (1-based), with jitter so
// that members do not retry in step.
func (e *Executor) backoff(n int) time.Duration {
	return backoff.Exponential(e.cfg.RetryBaseDelay, e.cfg.RetryMaxDelay, n)
}

// enterOutage records that a dependency is unavailable: fetching pauses,
// Ready fails, and the batch is retried after a backoff, without limit.
func (e *Executor) enterOutage(now time.Time, err error) {
	if e.outageSince.IsZero() {
		e.outageSince = now
		e.cl.PauseFetchTopics(e.cfg.Topics.Jobs)
		e.m.outage.Set(1)
		e.log.Warn("dependency unavailable: fetching paused, retrying without limit", zap.Error(err))
	}
	e.outageErr = err
	e.outageAttempts++
	e.outageRetryAt = now.Add(e.backoff(e.outageAttempts))
	e.refreshReady()
}

// refreshReady sets what Ready reports from the two ways a dependency is
// seen to be down: a batch that could not finish (outage), and polls that
// could not reach the broker while there was nothing to produce.
func (e *Executor) refreshReady() {
	switch {
	case !e.outageSince.IsZero():
		e.setReady(&UnavailableError{Since: e.outageSince, Err: e.outageErr})
	case !e.brokerDownSince.IsZero():
		e.setReady(&UnavailableError{Since: e.brokerDownSince, Err: fmt.Errorf("fetch jobs: %w", e.brokerErr)})
	default:
		e.setReady(nil)
	}
}

// brokerPingInterval is how often an unready member asks whether the
// broker answers again.
const brokerPingInterval = time.Second

// watchBroker keeps Ready true to the broker when the member has nothing
// to produce, which is when a batch's produce cannot notice an outage: a
// poll that fails to fetch (no broker or group coordinator answers) makes
// it unready, and a ping, at most every brokerPingInterval, makes it ready
// again once a broker answers. The client reconnects by itself; this only
// reports.
func (e *Executor) watchBroker(ctx context.Context, fetchErr error, now time.Time) {
	if fetchErr != nil {
		if e.brokerDownSince.IsZero() {
			e.brokerDownSince, e.brokerPingedAt = now, now
			e.log.Warn("broker unreachable: reporting not ready until it answers", zap.Error(fetchErr))
		}
		e.brokerErr = fetchErr
		e.refreshReady()
		return
	}
	if e.brokerDownSince.IsZero() || now.Sub(e.brokerPingedAt) < brokerPingInterval {
		return
	}
	e.brokerPingedAt = now
	pctx, cancel := context.WithTimeout(ctx, brokerPingInterval)
	err := e.cl.Ping(pctx)
	cancel()
	if err != nil {
		return
	}
	e.log.Info("broker reachable again", zap.Duration("after", now.Sub(e.brokerDownSince)))
	e.brokerDownSince, e.brokerErr = time.Time{}, nil
	e.refreshReady()
}

func (e *Executor) leaveOutage(now time.Time) {
	if e.outageSince.IsZero() {
		return
	}
	e.log.Info("dependency available again: fetching resumed",
		zap.Duration("after", now.Sub(e.outageSince)), zap.Int("attempts", e.outageAttempts))
	e.unavailable += now.Sub(e.outageSince)
	e.outageSince, e.outageErr, e.outageAttempts = time.Time{}, nil, 0
	e.cl.ResumeFetchTopics(e.cfg.Topics.Jobs)
	e.m.outage.Set(0)
	e.refreshReady()
}

// drop forgets revoked or lost partitions: their pending records (the next
// owner reads them again from the committed offset) and their cached
// streams. franz-go calls it between polls, so nothing is in flight. What
// the loop announced and has not committed yet (see OffsetCommitInterval)
// is committed first for revoked partitions, so that their next owner does
// not announce it again; a cancelled context means the client is closing,
// and Run has committed already.
func (e *Executor) drop(ctx context.Context, how string, m map[string][]int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ids := m[e.cfg.Topics.Jobs]; how == "revoked" && len(ids) > 0 && ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(ctx, e.cfg.ShutdownTimeout)
		e.commit(ctx, true, ids)
		cancel()
	}
	for _, id := range m[e.cfg.Topics.Jobs] {
		if ps := e.parts[id]; ps != nil {
			if ps.paused {
				e.cl.ResumeFetchPartitions(map[string][]int32{ps.topic: {id}})
			}
			if n := len(ps.jobs); n > 0 {
				e.log.Info("partition "+how+" with pending records", zap.Int32("partition", id), zap.Int("pending", n))
			}
			delete(e.parts, id)
		}
		e.cache.DropPartition(id)
	}
}

// iterate admits the polled records and processes what is ready. It returns
// an error only when the after-append hook stops the member.
func (e *Executor) iterate(ctx context.Context, recs []*kgo.Record) error {
	now := time.Now()
	for _, r := range recs {
		e.admit(r, now)
	}
	if len(recs) > 0 {
		e.m.since("decode", now)
	}
	if !e.outageSince.IsZero() && now.Before(e.outageRetryAt) {
		return nil
	}
	err := e.step(ctx, now)
	var crash *crashError
	switch {
	case errors.As(err, &crash):
		return err
	case err != nil && ctx.Err() != nil:
		// Shutting down past the deadline: leave the rest to re-delivery.
		e.log.Warn("batch abandoned at shutdown", zap.Error(err))
	case err != nil:
		// Only unavailability and produce failures end a step with an
		// error (retryLater accounts the rest per job); a broker that
		// refuses records is Kafka's problem, not the job's, so both
		// pause and retry without limit.
		e.enterOutage(time.Now(), err)
	default:
		e.leaveOutage(time.Now())
	}
	e.updatePauses()
	return nil
}

// updatePauses stops fetching a partition that holds too many unsettled
// records (parked behind a dependency or a model) until some settle.
func (e *Executor) updatePauses() {
	for _, ps := range e.parts {
		want := len(ps.jobs) >= e.cfg.MaxParkedPerPartition
		if want == ps.paused {
			continue
		}
		m := map[string][]int32{ps.topic: {ps.id}}
		if want {
			e.cl.PauseFetchPartitions(m)
			e.log.Warn("partition paused: too many unsettled records", zap.Int32("partition", ps.id), zap.Int("pending", len(ps.jobs)))
		} else {
			e.cl.ResumeFetchPartitions(m)
		}
		ps.paused = want
	}
}

// admit decodes a polled record (stage: decode). One that does not decode
// is settled at once as a dead letter; it never blocks its partition.
func (e *Executor) admit(rec *kgo.Record, now time.Time) {
	ps := e.parts[rec.Partition]
	if ps == nil {
		ps = &partition{id: rec.Partition, topic: rec.Topic, committed: -1}
		e.parts[rec.Partition] = ps
	}
	ps.last = rec
	p := &pending{rec: rec, seen: e.clock(now)}
	job, err := e.decoder.Job(rec)
	if err != nil {
		dl := record.NewUndecodableDeadLetter(rec, err, now)
		e.log.Warn("undecodable job record dead-lettered",
			zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset),
			zap.String("error_type", string(dl.ErrorType)), zap.Error(err))
		if id, doc, ok := record.ReadableIdentity(rec); ok {
			// Its producer asks for the job by id: write the verdict, so
			// status answers FAILED with the reason rather than PENDING.
			// Like any job, a job id that already has a result keeps it.
			p.job = &record.Job{JobID: id, DocumentID: doc, Branch: oplog.DefaultBranch}
			p.fail, p.bare, p.undecodable = err, true, dl
			ps.jobs = append(ps.jobs, p)
			return
		}
		p.settled = true
		e.m.deadLetters.WithLabelValues(string(dl.ErrorType)).Inc()
		if out, err := record.NewDeadLetterRecord(e.cfg.Topics.DeadLetters, dl); err != nil {
			e.log.Error("build dead letter", zap.Int64("offset", rec.Offset), zap.Error(err))
		} else {
			p.out = []*kgo.Record{out}
		}
	} else {
		p.job = job
	}
	ps.jobs = append(ps.jobs, p)
}

// flush produces the records announcing every settled job and waits for the
// acknowledgements (stage: produce), forgets those jobs, then commits the
// offsets (stage: commit). A failed produce keeps them for the next try.
func (e *Executor) flush(ctx context.Context) error {
	var out []*kgo.Record
	for _, ps := range e.sortedParts() {
		for _, p := range ps.jobs {
			if !p.settled {
				continue
			}
			// Fresh records each attempt: the client stamps a record when
			// it is first produced and times its delivery from that stamp,
			// so a record produced again would time out at once.
			for _, r := range p.out {
				out = append(out, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers})
			}
		}
	}
	if len(out) > 0 {
		// The client's record delivery timeout (ProduceTimeout) bounds the
		// produce; failing records from outside through a context while
		// their batch waits to be retried can wedge the partition's buffer.
		start := time.Now()
		err := e.cl.ProduceSync(ctx, out...).FirstErr()
		e.m.since("produce", start)
		if err != nil {
			return &produceError{n: len(out), err: err}
		}
	}
	for _, ps := range e.parts {
		ps.jobs = slices.DeleteFunc(ps.jobs, func(p *pending) bool { return p.settled })
	}
	e.commit(ctx, false, nil)
	return nil
}

// commit commits, per partition, the offset of its first unsettled record,
// or the one after the last record polled when none is pending: only what
// flush announced and saw acknowledged. The loop commits at most once per
// OffsetCommitInterval (nextWake brings an idle loop back for what is
// left); force commits now, at stop. ids restricts the commit to those
// partitions (nil: all).
func (e *Executor) commit(ctx context.Context, force bool, ids []int32) {
	offsets := map[int32]kgo.EpochOffset{}
	for id, ps := range e.parts {
		if ids != nil && !slices.Contains(ids, id) {
			continue
		}
		if eo, ok := ps.commitOffset(); ok && eo.Offset > ps.committed {
			offsets[id] = eo
		}
	}
	if len(offsets) == 0 {
		return
	}
	if !force && time.Since(e.lastCommit) < e.cfg.OffsetCommitInterval {
		return
	}
	e.lastCommit = time.Now()
	// Timed only when there is something to commit: a poll that commits
	// nothing must not pull the stage's mean toward zero.
	defer e.m.since("commit", e.lastCommit)
	var cerr error
	e.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{e.cfg.Topics.Jobs: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = kafka.CommitError(resp, err)
		})
	if cerr != nil {
		// Harmless: the next commit covers these offsets, and after a
		// rebalance the next owner re-announces what it reads again.
		e.log.Warn("offset commit failed", zap.Error(cerr))
		return
	}
	for id, eo := range offsets {
		if ps := e.parts[id]; ps != nil {
			ps.committed = eo.Offset
		}
	}
}

// uncommitted reports whether some partition has an offset to commit.
func (e *Executor) uncommitted() bool {
	for _, ps := range e.parts {
		if eo, ok := ps.commitOffset(); ok && eo.Offset > ps.committed {
			return true
		}
	}
	return false
}

// commitOffset is the offset the partition may commit: that of its first
// unsettled record, or the one after the last record polled.
func (ps *partition) commitOffset() (kgo.EpochOffset, bool) {
	switch {
	case len(ps.jobs) > 0:
		return kgo.EpochOffset{Epoch: ps.jobs[0].rec.LeaderEpoch, Offset: ps.jobs[0].rec.Offset}, true
	case ps.last != nil:
		return kgo.EpochOffset{Epoch: ps.last.LeaderEpoch, Offset: ps.last.Offset + 1}, true
	}
	return kgo.EpochOffset{}, false
}

func (e *Executor) sortedParts() []*partition {
	out := make([]*partition, 0, len(e.parts))
	for _, ps := range e.parts {
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b *partition) int { return int(a.id - b.id) })
	return out
}
