package executor

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// The group member: what the loop holds of its assigned partitions, the
// poll, admitting records, the rebalance callbacks and the offset commit.
// A poll's batch is run by step (batch.go) and announced by publish
// (announce.go); outages are in outage.go, pauses in pause.go.

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
	// settledChecked: a look-up of this partition's jobs found none of them
	// settled, so the records the previous owner may have applied before a
	// crash or rebalance are behind, and its later jobs go to the append
	// without a look-up of their own (see needsLookup).
	settledChecked bool
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
	// ann is the announcement in flight (AsyncAnnounce): out produced, the
	// acknowledgements not all in. retried: it is produced again after a
	// failure, and the member stays unavailable until it is acknowledged.
	ann     *announcement
	retried bool
	// recheck: the log refused a request of this job's because one of its
	// jobs was settled already: the job is looked up before it runs again.
	recheck bool
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

// wake ends the poll in progress, or makes the next one not wait, so that
// the loop looks at its state again without waiting for new records.
func (e *Executor) wake() {
	e.woken.Store(true)
	e.pollMu.Lock()
	defer e.pollMu.Unlock()
	if e.pollCancel != nil {
		e.pollCancel()
	}
}

// loop polls and processes until the stop, returning only a crash error.
func (e *Executor) loop(work context.Context) error {
	for e.stopCtx.Err() == nil {
		e.mu.Lock()
		wake := e.nextWake(time.Now())
		e.mu.Unlock()
		var (
			pollCtx context.Context
			cancel  context.CancelFunc
		)
		if wake.IsZero() {
			pollCtx, cancel = context.WithCancel(e.stopCtx)
		} else {
			pollCtx, cancel = context.WithDeadline(e.stopCtx, wake)
		}
		e.pollMu.Lock()
		e.pollCancel = cancel
		e.pollMu.Unlock()
		if e.woken.Swap(false) {
			cancel() // woken since the last iteration: act now
		}
		fetches := e.cl.PollRecords(pollCtx, e.cfg.MaxPollRecords)
		e.pollMu.Lock()
		e.pollCancel = nil
		e.pollMu.Unlock()
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

// drop forgets revoked or lost partitions: their pending records (the next
// owner reads them again from the committed offset) and their cached
// streams. franz-go calls it between polls, so nothing is in flight. What
// the loop announced and has not committed yet (see OffsetCommitInterval)
// is committed first for revoked partitions, so that their next owner does
// not announce it again; a cancelled context means the client is closing,
// and the run has committed already.
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
	// Announcements left from before (a failed produce, dead letters of
	// records that did not decode) go out before new work is taken, and
	// the batch's own as soon as it is settled.
	err := e.flush(ctx)
	if err == nil {
		err = e.step(ctx, now)
	}
	if err == nil {
		err = e.flush(ctx)
	}
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
		e.verifySignatures(p)
	}
	ps.jobs = append(ps.jobs, p)
}

// flush publishes what is settled (announce.go), then commits the offsets
// (stage: commit): an offset moves past a job only once its announcement
// is acknowledged.
func (e *Executor) flush(ctx context.Context) error {
	publish := e.publish
	if e.cfg.AsyncAnnounce {
		publish = func(context.Context) error { return e.publishAsync() }
	}
	if err := publish(ctx); err != nil {
		return err
	}
	e.commit(ctx, false, nil)
	return nil
}

// commit commits, per partition, the offset of its first unsettled record,
// or the one after the last record polled when none is pending: only what
// flush announced and saw acknowledged. The loop commits at most once per
// OffsetCommitInterval (nextWake brings an idle loop back for what is
// left), without waiting for the broker's answer: the commit is a round
// trip the next batch need not wait for, franz-go keeps commits in order,
// and a failure resends the offsets on the loop's next pass. force commits
// now and waits, at stop and for revoked partitions (whose next owner must
// see the offsets). ids restricts the commit to those partitions (nil:
// all).
func (e *Executor) commit(ctx context.Context, force bool, ids []int32) {
	if e.commitFailed.Swap(false) || (force && e.commitsInFlight.Load() > 0) {
		// What was sent may not have landed: send it all again. A forced
		// commit orders after the ones in flight, so it has the last word.
		for _, ps := range e.parts {
			ps.committed = -1
		}
	}
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
	start := e.lastCommit
	req := map[string]map[int32]kgo.EpochOffset{e.cfg.Topics.Jobs: offsets}
	if !force {
		for id, eo := range offsets {
			e.parts[id].committed = eo.Offset
		}
		e.commitsInFlight.Add(1)
		e.cl.CommitOffsets(ctx, req, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			defer e.commitsInFlight.Add(-1)
			// Timed only when there is something to commit: a poll that
			// commits nothing must not pull the stage's mean toward zero.
			e.m.since("commit", start)
			if cerr := kafka.CommitError(resp, err); cerr != nil {
				// Harmless: the loop sends the offsets again, and after a
				// rebalance the next owner re-announces what it reads again.
				e.log.Warn("offset commit failed", zap.Error(cerr))
				e.commitFailed.Store(true)
				e.wake()
			}
		})
		return
	}
	defer e.m.since("commit", start)
	var cerr error
	e.cl.CommitOffsetsSync(ctx, req,
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = kafka.CommitError(resp, err)
		})
	if cerr != nil {
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
