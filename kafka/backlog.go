package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Defaults of BacklogConfig.
const (
	// DefaultBacklogInterval matches the executor's offset commit interval:
	// the committed offsets move no faster than that.
	DefaultBacklogInterval = 100 * time.Millisecond
	// rateWindow is the span over which the drain rate is measured: long
	// enough to hold several of the group's commits.
	rateWindow = time.Second
	// capacityWindow is how long a drain rate measured while the group was
	// busy counts towards its capacity: long enough that a slow batch or a
	// short stall does not make the group look slow, short enough that the
	// capacity follows a change of the jobs' size. The rate is in records,
	// and a group that drained 2,000 jobs/s of one action drains a few
	// hundred of fifty: a capacity kept a minute from the small jobs let a
	// closed loop queue seconds of the large ones.
	capacityWindow = 2 * time.Second
	// stuckAfter is how long a partition's committed offset may stand still
	// and its old records still count in Backlog.Older. The executor does
	// not commit past a job parked on its queueHint (or on a document type
	// no member knows) while it works on the records behind it, so a
	// partition standing still that long is more likely parked than
	// behind: a group that keeps up commits every 100ms, and one that is
	// behind at least every batch, which on a machine starved of CPU can
	// take seconds.
	stuckAfter = 30 * time.Second
)

// Backlog is a consumer group's backlog on one topic, over all its
// partitions, as a BacklogWatcher last measured it and corrected for what
// was produced since.
type Backlog struct {
	// Records are the records past the group's committed offsets: those
	// the group has not worked through, plus up to one offset commit
	// interval of records it has processed but not committed yet.
	Records int64
	// Older are those of Records older than BacklogConfig.MaxAge by their
	// timestamps (the producer's clock): work that has waited longer than
	// that, on the partitions whose committed offset moved in the last 30
	// seconds (one standing still longer holds a parked job; its records
	// count in Records only). 0 without a MaxAge.
	Older int64
	// Rate is the records per second the group committed past over the
	// last second or so; 0 when it made no progress.
	Rate float64
	// Capacity is the fastest Rate measured in the last two seconds
	// during which the group stayed behind (records older than MaxAge
	// waiting at every measurement; without a MaxAge, any record
	// waiting): what it drains when it has more work than it keeps up
	// with, in records of the weight produced lately (see Produced). 0
	// until such a rate was measured, and again once the group has not
	// been behind for two seconds since; when the group stalls it keeps
	// its last value (while its records count in Older), since a stalled
	// group's backlog is no less work.
	Capacity float64
	// Weight is the weight of a record produced lately (see Produced), 1
	// while none was reported.
	Weight float64
	// MeasuredAt is when the measurement was taken; zero before the first.
	MeasuredAt time.Time
}

// Seconds is the time the group needs to work through Records at its
// Capacity, which is about how long a record produced now waits; false
// while the capacity is unknown.
func (b Backlog) Seconds() (float64, bool) {
	if b.Capacity <= 0 {
		return 0, false
	}
	return float64(b.Records) / b.Capacity, true
}

// BacklogConfig configures a BacklogWatcher.
type BacklogConfig struct {
	// Client reaches the brokers; the watcher sends its admin requests
	// through it and does not close it. Required.
	Client *kgo.Client
	// Group is the consumer group watched. Required.
	Group string
	// Topic is the topic whose partitions count. Required.
	Topic string
	// Interval is how often the backlog is measured, with one lag request
	// (the group's committed offsets and the topic's end offsets) shared
	// by every reader. Default DefaultBacklogInterval.
	Interval time.Duration
	// MaxAge, when positive, makes each measurement also count the
	// waiting records older than it (Backlog.Older), with one more
	// request: the offsets of the first records at or after now−MaxAge;
	// the capacity then counts only windows in which such records waited
	// throughout. Default 0: not counted, and any record waiting counts.
	MaxAge time.Duration
	// Logger logs failed measurements. Default: none.
	Logger *zap.Logger
}

// BacklogWatcher keeps a consumer group's backlog current in the
// background, so that a caller deciding per request (ingest's admission
// control) reads it from memory.
//
// The backlog is measured in records, from the committed offsets, as
// `doclogctl status` and the lag gauges measure it. Its age is measured
// against MaxAge without reading a record: the broker's offset for the
// timestamp now−MaxAge, past the committed offset, means records older than
// that still wait; how many is the difference. The group's drain rate, from
// the committed offsets' progress, turns records into time for an estimate
// (Seconds) and a Retry-After. Between measurements the records this
// process reports with Produced are added to Records and the drain at Rate
// subtracted, so a burst is seen at once rather than one interval late.
type BacklogWatcher struct {
	cfg BacklogConfig
	adm *kadm.Client

	produced       atomic.Int64 // records reported produced, ever
	producedWeight atomic.Int64 // their weight
	reserved       atomic.Int64 // records reserved and not released
	last           atomic.Pointer[measurement]

	// The measuring goroutine's own state.
	samples  []sample // the last rateWindow or so of measurements
	peaks    []peak   // busy drain rates of the last capacityWindow
	failures int      // consecutive failed measurements
	// perRecord is the weight per record of what this process produced
	// lately (0: none reported, each record weighs 1), from the counters
	// as they were at the last measurement (weighed).
	perRecord               float64
	weighed, weighedRecords int64
	moved                   map[int32]position

	mu      sync.Mutex
	started bool
	stopped bool
	stop    context.CancelFunc
	done    chan struct{}
}

type measurement struct {
	Backlog
	produced int64 // the produced counter when the measurement started
}

// position is where a partition's committed offset was and since when.
type position struct {
	committed int64
	since     time.Time
}

type sample struct {
	at        time.Time
	committed int64 // the sum over partitions of the committed offsets
	lag       int64
	older     int64 // Backlog.Older at the measurement
}

type peak struct {
	at time.Time
	// work is the drain rate in weight per second: the records' rate at
	// the weight per record of the time.
	work float64
}

// NewBacklogWatcher checks cfg and returns a watcher; Start starts it.
func NewBacklogWatcher(cfg BacklogConfig) (*BacklogWatcher, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("backlog watcher needs a Kafka client")
	case cfg.Group == "":
		return nil, errors.New("backlog watcher needs a consumer group")
	case cfg.Topic == "":
		return nil, errors.New("backlog watcher needs a topic")
	case cfg.Interval < 0:
		return nil, fmt.Errorf("backlog watcher interval must be positive, got %s", cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultBacklogInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.MaxAge < 0 {
		cfg.MaxAge = 0
	}
	return &BacklogWatcher{cfg: cfg, adm: kadm.NewClient(cfg.Client), moved: map[int32]position{}}, nil
}

// Start takes a first measurement (its failure is logged, not returned: the
// watcher keeps trying) and measures every Interval until Stop. ctx bounds
// the first measurement only. Starting twice, or after Stop, is an error.
func (w *BacklogWatcher) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.stopped {
		return errors.New("backlog watcher already started or stopped")
	}
	w.started = true
	w.measure(ctx)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.stop, w.done = cancel, make(chan struct{})
	go w.run(runCtx)
	return nil
}

// Stop stops the measuring and waits for it, bounded by ctx. Stopping twice,
// or a watcher never started, is harmless.
func (w *BacklogWatcher) Stop(ctx context.Context) error {
	w.mu.Lock()
	stop, done := w.stop, w.done
	w.stop, w.stopped = nil, true
	w.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping the backlog watcher: %w", ctx.Err())
	}
}

// Produced reports records produced to the topic by this process since
// the last measurement could see them, and the work they stand for in the
// caller's own unit (weight; 0 counts each record as 1).
//
// The drain rate is measured in records, but the group's speed is in work:
// the same executors drain thousands of jobs of one action a second and a
// few hundred of fifty. Each busy drain rate is kept as work per second, at
// the work per record of what was produced then, and the capacity is that
// work at the work per record produced now, so that a capacity measured on
// small records does not let through seconds of large ones.
func (w *BacklogWatcher) Produced(records, weight int) {
	if weight <= 0 {
		weight = records
	}
	w.produced.Add(int64(records))
	w.producedWeight.Add(int64(weight))
}

// Reserve counts n records this process is about to produce in Backlog at
// once, until Release takes them out again (then Produced counts those that
// were produced). A caller deciding whether to produce by the backlog
// reserves first: callers deciding at the same moment then see each
// other's records, where counted only once produced they would all see the
// same backlog and all go ahead.
func (w *BacklogWatcher) Reserve(n int) { w.reserved.Add(int64(n)) }

// Release takes n records out of the reservation: produced (and reported
// with Produced) or given up.
func (w *BacklogWatcher) Release(n int) { w.reserved.Add(-int64(n)) }

// Backlog returns the backlog now: the last measurement, plus the records
// produced since it started and those reserved, minus what the group
// drained since at Rate. Its MeasuredAt is zero before a first measurement
// succeeded.
func (w *BacklogWatcher) Backlog() Backlog {
	m := w.last.Load()
	if m == nil {
		return Backlog{}
	}
	b := m.Backlog
	b.Records += w.produced.Load() - m.produced + max(w.reserved.Load(), 0)
	b.Records -= int64(b.Rate * time.Since(b.MeasuredAt).Seconds())
	b.Records = max(b.Records, 0)
	return b
}

func (w *BacklogWatcher) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.measure(ctx)
		}
	}
}

// measure takes one measurement. A failure keeps the last one; the caller
// reading it sees how old it is.
func (w *BacklogWatcher) measure(ctx context.Context) {
	produced := w.produced.Load()
	mctx, cancel := context.WithTimeout(ctx, max(10*w.cfg.Interval, 2*time.Second))
	defer cancel()
	ageFrom := time.Now().Add(-w.cfg.MaxAge).UnixMilli()
	lags, err := groupLags(mctx, w.adm, w.cfg.Group)
	if err == nil && !slices.ContainsFunc(lags, func(l PartitionLag) bool { return l.Topic == w.cfg.Topic }) {
		// A group that has not consumed yet, or one the coordinator
		// answers for as unknown for a moment: no figure at all, rather
		// than a backlog of 0.
		err = fmt.Errorf("group %s has no offsets on %s", w.cfg.Group, w.cfg.Topic)
	}
	var young kadm.ListedOffsets
	if err == nil && w.cfg.MaxAge > 0 {
		young, err = w.adm.ListOffsetsAfterMilli(mctx, ageFrom, w.cfg.Topic)
		if err == nil {
			err = young.Error()
		}
		if err != nil {
			err = fmt.Errorf("listing the offsets of %s at %d ms: %w", w.cfg.Topic, ageFrom, err)
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			// Logged on the first failure and then every hundredth, so an
			// outage does not flood the log at the measuring rate.
			if w.failures%100 == 0 {
				w.cfg.Logger.Warn("measuring the consumer group's backlog failed", zap.String("group", w.cfg.Group),
					zap.Int("consecutive_failures", w.failures+1), zap.Error(err))
			}
			w.failures++
		}
		return
	}
	w.failures = 0
	w.weigh()
	now := time.Now()
	s := sample{at: now}
	var older int64
	for _, l := range lags {
		if l.Topic != w.cfg.Topic {
			continue
		}
		committed := l.End - l.Lag // the log start where nothing was committed
		s.lag += l.Lag
		s.committed += committed
		pos, ok := w.moved[l.Partition]
		if !ok || pos.committed != committed {
			pos = position{committed: committed, since: now}
			w.moved[l.Partition] = pos
		}
		// The first record young enough is past the committed offset: the
		// records between are older than MaxAge and still wait.
		if o, ok := young.Lookup(l.Topic, l.Partition); ok && o.Offset > committed && now.Sub(pos.since) <= stuckAfter {
			older += o.Offset - committed
		}
	}
	s.older = older
	b := w.add(s)
	b.Older = older
	w.last.Store(&measurement{Backlog: b, produced: produced})
}

// weigh updates the weight per record from what was produced since the last
// measurement: at once when it rose, halfway when it fell, so that heavier
// records are counted as such from the first measurement and lighter ones
// let more through only over a few; a measurement with nothing produced
// keeps the last figure.
func (w *BacklogWatcher) weigh() {
	records, weight := w.produced.Load(), w.producedWeight.Load()
	dr, dw := records-w.weighedRecords, weight-w.weighed
	w.weighedRecords, w.weighed = records, weight
	if dr <= 0 || dw <= 0 {
		return
	}
	x := float64(dw) / float64(dr)
	if x >= w.perRecord {
		w.perRecord = x
		return
	}
	w.perRecord = (w.perRecord + x) / 2
}

// weightPerRecord is perRecord, 1 while none was reported.
func (w *BacklogWatcher) weightPerRecord() float64 {
	if w.perRecord <= 0 {
		return 1
	}
	return w.perRecord
}

// add records a sample and derives the backlog from it: the drain rate over
// the last rateWindow, and the capacity from the rates of windows the group
// was behind throughout (behind).
func (w *BacklogWatcher) add(s sample) Backlog {
	w.samples = append(w.samples, s)
	// Keep the newest sample at least rateWindow old as the window's start.
	for len(w.samples) > 2 && s.at.Sub(w.samples[1].at) >= rateWindow {
		w.samples = w.samples[1:]
	}
	b := Backlog{Records: s.lag, Weight: w.weightPerRecord(), MeasuredAt: s.at}
	first := w.samples[0]
	if span := s.at.Sub(first.at); span > 0 && s.committed >= first.committed {
		b.Rate = float64(s.committed-first.committed) / span.Seconds()
		busy := span >= rateWindow/2
		for _, x := range w.samples {
			busy = busy && w.behind(x)
		}
		if busy && b.Rate > 0 {
			w.peaks = append(w.peaks, peak{at: s.at, work: b.Rate * w.weightPerRecord()})
		}
	}
	// A group that stalls adds no peaks, so it keeps its last capacity.
	if n := len(w.peaks); n > 0 {
		newest := w.peaks[n-1].at
		for len(w.peaks) > 1 && newest.Sub(w.peaks[0].at) > capacityWindow {
			w.peaks = w.peaks[1:]
		}
	}
	// A group with nothing waiting drains all it is given, so a capacity
	// measured before may be far below what it does now, and a caller
	// refusing by it would never let it be busy enough to measure another:
	// a capacity taken from jobs of 200 KB held jobs of 100 bytes to one at
	// a time. Not behind, it forgets peaks older than the window, until
	// it is behind again; a stall (records waiting and ageing, no
	// progress) keeps them.
	if !w.behind(s) {
		cut := s.at.Add(-capacityWindow)
		w.peaks = slices.DeleteFunc(w.peaks, func(p peak) bool { return p.at.Before(cut) })
	}
	for _, p := range w.peaks {
		b.Capacity = max(b.Capacity, p.work/w.weightPerRecord())
	}
	return b
}

// behind reports whether the group was behind at s: records older than
// MaxAge waited, or, without a MaxAge, any record. Records merely waiting
// do not show it: a group held below what it drains (by a caller refusing
// by its capacity) has records waiting at every measurement, as does one
// that drained within the window all a burst gave it, and a capacity
// taken from either is the rate it was given, not what it drains; held to
// that, it drains as little again.
func (w *BacklogWatcher) behind(s sample) bool {
	if w.cfg.MaxAge > 0 {
		return s.older > 0
	}
	return s.lag > 0
}
