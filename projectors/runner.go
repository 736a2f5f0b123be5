package projectors

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/depwait"
	"github.com/doclog/doclog/internal/lifecycle"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// Runner drives one projector: a consumer group on the write-ready topic
// whose partitions are fenced by epochs stored with their checkpoints, and a
// reconciler. Create it with New, start it with Start, stop it with Stop.
type Runner struct {
	cfg    Config
	name   string
	filter Filter
	types  *documentTypes // nil unless the filter selects by document type
	adv    *advancer
	m      *metrics
	logger *zap.Logger
	cl     *kgo.Client

	life lifecycle.Lifecycle

	mu              sync.Mutex
	parts           map[int32]*partition
	running         bool
	lastBatchAt     time.Time
	lastErr         error
	lastErrAt       time.Time
	lastReconcileAt time.Time
	reconcileErr    error
	quarantined     int

	hooks hooks

	// Owned by the run's goroutine: checkpoints of polls that had nothing to
	// write, and when the last batch transaction committed (see handle).
	deferred map[int32]kgo.EpochOffset
	lastTx   time.Time
	// behind is owned by the reconcile loop's goroutine: the streams its
	// last periodic pass found behind, with the log's head then.
	behind map[oplog.StreamKey]int64
}

// hooks let tests stop a batch at chosen points (export_test.go).
type hooks struct {
	// inTx runs in the batch transaction after the projector wrote and
	// before the checkpoints move; an error rolls the batch back.
	inTx func(ctx context.Context) error
	// afterTx runs after the database commit and before the Kafka commit.
	afterTx func(ctx context.Context)
}

// partition is an assigned partition and the epoch this member holds.
type partition struct {
	id     int32
	epoch  int64
	fenced bool
}

// New validates cfg and creates the runner's Kafka client; nothing is
// consumed until Start.
func New(cfg Config) (*Runner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	filter := cfg.Projector.Filter()
	r := &Runner{
		cfg:    cfg,
		name:   cfg.Projector.Name(),
		filter: filter,
		types:  newDocumentTypes(filter, cfg.Log),
		m:      newMetrics(cfg.Registerer, cfg.Projector.Name()),
		logger: cfg.Logger.With(zap.String("projector", cfg.Projector.Name())),
		parts:  map[int32]*partition{},

		deferred: map[int32]kgo.EpochOffset{},
	}
	r.adv = &advancer{projector: cfg.Projector, filter: filter, log: cfg.Log, reg: cfg.Registry, heads: newHeadCache(cfg.HeadCacheBytes),
		hit: r.m.headCache.WithLabelValues(r.name, "hit"), miss: r.m.headCache.WithLabelValues(r.name, "miss")}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		// Offsets are committed after the database commit, by hand: the
		// checkpoint in Postgres is the truth, the Kafka offset is for lag
		// tools.
		kgo.DisableAutoCommit(),
		kgo.AdjustFetchOffsetsFn(r.adjustOffsets),
		kgo.OnPartitionsRevoked(r.dropPartitions),
		kgo.OnPartitionsLost(r.dropPartitions),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
	}
	opts = append(opts, cfg.Kafka.Membership.GroupOptions()...)
	cl, err := kafka.NewClient(cfg.Kafka, cfg.Logger, append(opts, cfg.KafkaOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("projector %s: %w", r.name, err)
	}
	r.cl = cl
	return r, nil
}

// Start starts consuming in a goroutine of its own and returns at once; ctx
// bounds the start only. It fails when the runner was started or stopped
// before. Failures while running never stop the runner: they are retried,
// logged, counted and reported by Ready.
func (r *Runner) Start(ctx context.Context) error {
	err := r.life.Start(ctx, func(ctx context.Context) (func() error, error) {
		r.mu.Lock()
		r.running = true
		r.mu.Unlock()
		return func() error {
			r.run(ctx)
			r.release()
			return nil
		}, nil
	})
	if err != nil {
		return fmt.Errorf("projector %s: %w", r.name, err)
	}
	return nil
}

// Stop stops consuming, commits what waits, leaves the group and waits for
// all that, or for ctx to end (then it returns ctx's error and the runner
// goes on stopping). Stopping twice, or a runner never started, is
// harmless; a runner never started leaves the group too.
func (r *Runner) Stop(ctx context.Context) error {
	if err := r.life.Stop(ctx, r.release); err != nil {
		return fmt.Errorf("projector %s: %w", r.name, err)
	}
	return nil
}

// Done is closed once the runner has stopped.
func (r *Runner) Done() <-chan struct{} { return r.life.Done() }

// Err is nil: a runner retries every failure rather than stop on one. It is
// there so that a runner has the lifecycle of the executor.
func (r *Runner) Err() error { return r.life.Err() }

// run consumes until ctx ends.
func (r *Runner) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wg sync.WaitGroup
	if r.cfg.ReconcileInterval > 0 {
		wg.Go(func() { r.reconcileLoop(ctx) })
	}
	r.logger.Info("projector started", zap.String("group", r.cfg.Group), zap.String("topic", r.cfg.Topic))
	// Kafka offsets of committed batches wait here for the next commit
	// (Config.OffsetCommitInterval); a poll with some waiting ends by then
	// even when no record comes, so an idle projector's lag reads true.
	pending := map[int32]kgo.EpochOffset{}
	lastCommit := time.Now()
	for ctx.Err() == nil {
		pollCtx, cancelPoll := ctx, context.CancelFunc(func() {})
		var wake time.Time
		if len(pending) > 0 {
			wake = lastCommit.Add(r.cfg.OffsetCommitInterval)
		}
		if len(r.deferred) > 0 {
			if due := r.lastTx.Add(r.cfg.OffsetCommitInterval); wake.IsZero() || due.Before(wake) {
				wake = due
			}
		}
		if !wake.IsZero() {
			pollCtx, cancelPoll = context.WithDeadline(ctx, wake)
		}
		fetches := r.cl.PollRecords(pollCtx, r.cfg.MaxPollRecords)
		cancelPoll()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			break
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			r.m.errors.WithLabelValues(r.name, "fetch").Inc()
			r.fail(fmt.Errorf("fetch %s partition %d: %w", topic, p, err))
		})
		// A poll's partitions are applied as one fenced transaction: one
		// commit (and fsync) and one set of statements per poll rather than
		// per partition. One Kafka commit then covers every partition that
		// committed since the last one.
		var polled []kgo.FetchTopicPartition
		fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if len(ftp.Records) > 0 && ftp.Topic == r.cfg.Topic {
				polled = append(polled, ftp)
			}
		})
		if len(polled) > 0 || r.checkpointDue() {
			maps.Copy(pending, r.handle(ctx, polled))
		}
		if len(pending) > 0 && time.Since(lastCommit) >= r.cfg.OffsetCommitInterval {
			r.commit(ctx, pending)
			pending, lastCommit = map[int32]kgo.EpochOffset{}, time.Now()
		}
	}
	if len(pending) > 0 || len(r.deferred) > 0 {
		// Stopping: write the deferred checkpoints and commit what is
		// waiting, the run's context being done.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if len(r.deferred) > 0 {
			maps.Copy(pending, r.handle(cctx, nil))
		}
		r.commit(cctx, pending)
		ccancel()
	}
	cancel()
	wg.Wait()
	r.mu.Lock()
	r.running = false
	r.mu.Unlock()
	r.logger.Info("projector stopped")
}

// release closes the client and leaves the group, once the run (if any)
// returned.
func (r *Runner) release() {
	r.cl.Close()
	ctx, cancelLeave := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelLeave()
	if err := kafka.Leave(ctx, r.cfg.Kafka, r.cfg.Group, r.logger); err != nil {
		r.logger.Warn("could not leave the group: the partitions move when the session times out", zap.Error(err))
	}
}

// adjustOffsets runs when partitions are assigned: it bumps each one's epoch
// (fencing the member that had it) and seeks to its checkpoint.
func (r *Runner) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for topic, parts := range offsets {
		if topic != r.cfg.Topic {
			continue
		}
		for p := range parts {
			var cp Checkpoint
			err := r.retry(ctx, "assign", func() error {
				var err error
				cp, err = r.cfg.Store.Assign(ctx, r.name, p)
				return err
			})
			if err != nil {
				return nil, err
			}
			if cp.NextOffset >= 0 {
				parts[p] = kgo.NewOffset().At(cp.NextOffset).WithEpoch(-1)
			} else if parts[p], err = r.startOffset(ctx, p, cp.Epoch); err != nil {
				return nil, err
			}
			r.mu.Lock()
			r.parts[p] = &partition{id: p, epoch: cp.Epoch}
			r.mu.Unlock()
			r.logger.Info("partition assigned", zap.Int32("partition", p), zap.Int64("epoch", cp.Epoch), zap.Int64("next_offset", cp.NextOffset))
		}
	}
	return offsets, nil
}

func (r *Runner) dropPartitions(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range lost[r.cfg.Topic] {
		delete(r.parts, p)
		r.m.lag.DeleteLabelValues(r.name, strconv.Itoa(int(p)))
	}
}

func (r *Runner) partition(p int32) (partition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x, ok := r.parts[p]
	if !ok || x.fenced {
		return partition{}, false
	}
	return *x, true
}

// retry runs f until it succeeds or ctx ends, with exponential backoff,
// recording each failure so Ready reports it.
func (r *Runner) retry(ctx context.Context, kind string, f func() error) error {
	delay := r.cfg.RetryBaseDelay
	for {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fe *FencedError
		if errors.As(err, &fe) {
			return err
		}
		r.m.errors.WithLabelValues(r.name, kind).Inc()
		r.fail(err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, r.cfg.RetryMaxDelay)
	}
}

func (r *Runner) fail(err error) {
	r.logger.Error("projector error", zap.Error(err))
	r.mu.Lock()
	r.lastErr, r.lastErrAt = err, time.Now()
	r.mu.Unlock()
}

// decode turns a partition's records into wanted streams. A record that
// cannot be decoded is logged and counted and does not block the partition:
// it carries nothing the log does not also hold, and the reconciler catches
// anything it announced.
func (r *Runner) decode(recs []*kgo.Record) (wants, []jobTimes) {
	w := wants{}
	times := make([]jobTimes, 0, len(recs))
	for _, rec := range recs {
		wr, err := r.cfg.SharedDecode.decode(rec)
		if err != nil {
			r.m.errors.WithLabelValues(r.name, "decode").Inc()
			r.logger.Error("undecodable write-ready record", zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset), zap.Error(err))
			continue
		}
		times = append(times, jobTimes{submitted: wr.SubmittedAtUtcMs, written: wr.WrittenAtUtcMs})
		r.types.saw(wr.DocumentID, wr.DocumentType)
		for _, s := range wr.Streams {
			if !r.filter.Follows(wr.DocumentType, s.Stream) {
				continue
			}
			var ops []oplog.Operation
			if !wr.OperationsOmitted {
				for _, op := range wr.Operations {
					if op.Stream() == s.Stream {
						ops = append(ops, op)
					}
				}
			}
			w.add(s.Stream, wr.DocumentType, s.ToIndex, ops)
		}
	}
	return w, times
}

// jobTimes are a write-ready record's timestamps, epoch ms (0: unknown).
type jobTimes struct{ submitted, written int64 }

// observeLatency records, once a batch committed, how long its jobs took to
// get here.
func (r *Runner) observeLatency(times []jobTimes) {
	now := time.Now().UnixMilli()
	submit, write := r.m.jobLatency.WithLabelValues(r.name, "submit"), r.m.jobLatency.WithLabelValues(r.name, "write")
	for _, t := range times {
		if t.submitted > 0 {
			submit.Observe(float64(max(now-t.submitted, 0)) / 1000)
		}
		if t.written > 0 {
			write.Observe(float64(max(now-t.written, 0)) / 1000)
		}
	}
}

// polledPartition is one partition's share of a poll, decoded, or a
// deferred checkpoint (no records).
type polledPartition struct {
	id    int32
	next  kgo.EpochOffset // the checkpoint after this share
	w     wants
	times []jobTimes
	n     int // records
}

// checkpointDue reports whether deferred checkpoints have waited an
// OffsetCommitInterval since the last batch transaction.
func (r *Runner) checkpointDue() bool {
	return len(r.deferred) > 0 && time.Since(r.lastTx) >= r.cfg.OffsetCommitInterval
}

// handle applies a poll's partitions as one fenced transaction, retrying it
// until it commits or the runner stops. A partition found fenced (it moved
// to another member) is marked and left out, and the rest is tried again at
// once. It returns, per partition, the offset to commit to Kafka once the
// database committed.
//
// A poll that brings no stream the projector follows (the indexer's share
// of a workload of global-scope operations) has nothing to write but its
// checkpoints; those are deferred while the last transaction is younger
// than OffsetCommitInterval, and ride with the next transaction (or one of
// their own once due). A deferred checkpoint lost in a crash or a
// rebalance only makes the next owner read those records again, which
// changes nothing.
func (r *Runner) handle(ctx context.Context, polled []kgo.FetchTopicPartition) map[int32]kgo.EpochOffset {
	parts := make([]polledPartition, 0, len(polled)+len(r.deferred))
	idle := true
	for _, ftp := range polled {
		last := ftp.Records[len(ftp.Records)-1]
		r.m.lag.WithLabelValues(r.name, strconv.Itoa(int(ftp.Partition))).Set(float64(max(0, ftp.HighWatermark-last.Offset-1)))
		start := time.Now()
		w, times := r.decode(ftp.Records)
		r.m.stage.WithLabelValues(r.name, "decode").Observe(time.Since(start).Seconds())
		parts = append(parts, polledPartition{id: ftp.Partition, next: kgo.EpochOffset{Epoch: last.LeaderEpoch, Offset: last.Offset + 1},
			w: w, times: times, n: len(ftp.Records)})
		idle = idle && len(w) == 0
		delete(r.deferred, ftp.Partition) // this poll's checkpoint is later
	}
	if idle && len(polled) > 0 && time.Since(r.lastTx) < r.cfg.OffsetCommitInterval {
		for _, pp := range parts {
			r.deferred[pp.id] = pp.next
			r.observeLatency(pp.times)
		}
		return nil
	}
	for id, next := range r.deferred {
		parts = append(parts, polledPartition{id: id, next: next})
	}
	clear(r.deferred)
	for {
		var (
			out  outcome
			held []polledPartition
		)
		err := r.retry(ctx, "batch", func() error {
			held = held[:0]
			var fences []Fence
			w := wants{}
			for _, pp := range parts {
				part, ok := r.partition(pp.id)
				if !ok {
					continue // revoked or fenced meanwhile
				}
				held = append(held, pp)
				fences = append(fences, Fence{Projector: r.name, Partition: part.id, Epoch: part.epoch, NextOffset: pp.next.Offset})
				w.merge(pp.w)
			}
			if len(held) == 0 {
				return nil
			}
			start := time.Now()
			err := r.cfg.Store.InTx(ctx, fences, func(tx Tx) error {
				var err error
				if out, err = r.adv.advance(ctx, tx, w); err != nil {
					return err
				}
				if r.hooks.inTx != nil {
					return r.hooks.inTx(ctx)
				}
				return nil
			})
			r.m.stage.WithLabelValues(r.name, "transaction").Observe(time.Since(start).Seconds())
			return err
		})
		var fe *FencedError
		switch {
		case errors.As(err, &fe):
			r.m.fenced.Inc()
			r.logger.Warn("batch fenced: the partition moved to another member", zap.Int32("partition", fe.Partition),
				zap.Int64("epoch", fe.Epoch), zap.Int64("current_epoch", fe.Current))
			r.mu.Lock()
			if x, ok := r.parts[fe.Partition]; ok && x.epoch == fe.Epoch {
				x.fenced = true
			}
			r.mu.Unlock()
			continue // without the fenced partition
		case err != nil:
			return nil // the runner is stopping; the batch rolled back
		case len(held) == 0:
			return nil
		}
		r.lastTx = time.Now()
		r.adv.committed(out)
		records := 0
		offsets := make(map[int32]kgo.EpochOffset, len(held))
		for _, pp := range held {
			records += pp.n
			r.observeLatency(pp.times)
			offsets[pp.id] = pp.next
		}
		r.observe(out, "batch", records)
		if r.hooks.afterTx != nil {
			r.hooks.afterTx(ctx)
		}
		return offsets
	}
}

// commit commits the offsets of the partitions whose batches committed.
func (r *Runner) commit(ctx context.Context, pending map[int32]kgo.EpochOffset) {
	// Only the partitions still held: another member owns the others now.
	offsets := map[int32]kgo.EpochOffset{}
	r.mu.Lock()
	for p, at := range pending {
		if _, ok := r.parts[p]; ok {
			offsets[p] = at
		}
	}
	r.mu.Unlock()
	if len(offsets) == 0 || ctx.Err() != nil {
		return
	}
	start := time.Now()
	var commitErr error
	r.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{r.cfg.Topic: offsets}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = kafka.CommitError(resp, err)
	})
	if err := commitErr; err != nil && ctx.Err() == nil {
		// Not fatal: the checkpoint in Postgres is what the next owner
		// seeks to; the Kafka offset only feeds lag tools.
		r.m.errors.WithLabelValues(r.name, "commit").Inc()
		r.logger.Warn("commit kafka offsets", zap.Error(err))
	}
	r.m.stage.WithLabelValues(r.name, "commit").Observe(time.Since(start).Seconds())
}

// observe records a committed advance.
func (r *Runner) observe(out outcome, source string, records int) {
	if source == "batch" {
		r.m.batches.Inc()
		r.m.batchRecords.Observe(float64(records))
	}
	r.m.applied.Add(float64(out.applied))
	r.m.redelivered.Add(float64(out.skipped))
	if out.healed > 0 {
		r.m.healed.WithLabelValues(r.name, source).Add(float64(out.healed))
		r.logger.Info("healed operations from the log", zap.String("source", source), zap.Int("operations", out.healed))
	}
	for _, q := range out.quarantines {
		r.m.quarantines.Inc()
		r.logger.Error("stream quarantined", zap.Stringer("stream", q.Stream), zap.Int64("index", q.Index),
			zap.String("error", q.ErrorName), zap.String("reason", q.Reason))
	}
	r.mu.Lock()
	if source == "batch" {
		r.lastBatchAt = time.Now()
		r.lastErr = nil
	}
	r.quarantined += len(out.quarantines)
	r.m.quarantined.Set(float64(r.quarantined))
	r.mu.Unlock()
}

// Status is a snapshot of a runner for health checks and the admin CLI.
type Status struct {
	Projector       string
	Group           string
	Running         bool
	Partitions      []PartitionStatus
	LastBatchAt     time.Time
	LastError       string
	LastErrorAt     time.Time
	LastReconcileAt time.Time
	ReconcileError  string
	// Quarantined is the number of quarantined streams as of the last
	// reconciler pass plus those quarantined since.
	Quarantined int
}

// PartitionStatus is one assigned partition.
type PartitionStatus struct {
	Partition int32
	Epoch     int64
	// Fenced is set when a batch found the epoch stale: the partition moved
	// and this member waits for the rebalance to revoke it.
	Fenced bool
}

// Status returns the runner's state.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{
		Projector: r.name, Group: r.cfg.Group, Running: r.running, LastBatchAt: r.lastBatchAt,
		LastErrorAt: r.lastErrAt, LastReconcileAt: r.lastReconcileAt, Quarantined: r.quarantined,
	}
	if r.lastErr != nil {
		s.LastError = r.lastErr.Error()
	}
	if r.reconcileErr != nil {
		s.ReconcileError = r.reconcileErr.Error()
	}
	for _, p := range r.parts {
		s.Partitions = append(s.Partitions, PartitionStatus{Partition: p.id, Epoch: p.epoch, Fenced: p.fenced})
	}
	return s
}

// Ready reports why the runner is not serving: not running, its last batch
// failed (it is being retried), a partition is fenced, or the last
// reconciler pass failed. Quarantined streams do not make it unready (the
// other streams go on); they have their own metric and alert.
//
// The report goes to the ops port's /readyz, which answers anyone who
// reaches it, so a failure is named by its class (failureClass), never by
// its text: a driver's error names the servers, ports and database user.
// The text is in the log and in Status.
func (r *Runner) Ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.running:
		return fmt.Errorf("projector %s is not running", r.name)
	case r.lastErr != nil:
		return fmt.Errorf("projector %s: failing and retrying (%s)", r.name, failureClass(r.lastErr))
	case r.reconcileErr != nil:
		return fmt.Errorf("projector %s: the last reconcile pass failed (%s)", r.name, failureClass(r.reconcileErr))
	}
	for _, p := range r.parts {
		if p.fenced {
			return fmt.Errorf("projector %s: partition %d is fenced at epoch %d", r.name, p.id, p.epoch)
		}
	}
	return nil
}

// failureClass names a failure safely for anyone to read: a dependency's
// by its reason (depwait.Classify: "connection refused", "the server
// refused (SQLSTATE 42P01)"), a Kafka refusal by its protocol name, a log or
// model error by its stable name, anything else as in the log.
func failureClass(err error) string {
	var ke *kerr.Error
	switch {
	case model.ErrorName(err) != "":
		return model.ErrorName(err)
	case depwait.Classify(err) != "":
		return depwait.Classify(err)
	case errors.As(err, &ke):
		return "Kafka refused: " + ke.Message
	}
	return "an error the log holds"
}
