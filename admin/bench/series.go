package bench

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
)

// DefaultSeriesInterval is Config.SeriesInterval's default.
const DefaultSeriesInterval = 10 * time.Second

// SeriesProcess is a process the time series follows: its resident set and
// CPU, with those of its descendants (a Postgres server's backends).
type SeriesProcess struct {
	Name string
	PID  int
}

// SeriesRow is one interval of the time series. Latency is of the jobs
// that became READ_READY in the interval; a field that could not be
// measured is NaN (an empty cell in the CSV).
type SeriesRow struct {
	Elapsed, Interval   time.Duration
	SubmittedOpsPerSec  float64
	ReadReadyOpsPerSec  float64
	P50Ms, P99Ms        float64
	ExecutorLag         float64 // records on the jobs topic
	ExecutorLagSeconds  float64
	ProjectorLag        float64 // records on the write-ready topic, the projector furthest behind
	ProjectorLagSeconds float64
	Processes           []ProcessUsage
}

// ProcessUsage is a followed process's memory and CPU over an interval.
type ProcessUsage struct {
	Name string
	// RSSBytes is the process's VmRSS plus the anonymous resident memory
	// of its descendants, so memory they share (Postgres' shared buffers)
	// counts once.
	RSSBytes int64
	// CPUCores is the CPU time used in the interval over its length: 1.0
	// is one core busy throughout.
	CPUCores float64
}

// pendingJob is a submitted job the series has not yet seen READ_READY.
type pendingJob struct {
	id    string
	doc   int
	ops   int
	due   time.Time
	known bool  // its result has been read
	index int64 // its token's index on the document's global stream
}

// series writes a row every SeriesInterval while jobs are submitted.
//
// The latency of an interval needs each job's READ_READY time while the run
// goes on, which the report otherwise computes after it. The sampler
// already holds the view's timeline per document; what is missing is each
// job's index on its stream, which only its result carries. So at each
// tick the series reads the results of the jobs it has not seen written
// yet, in chunks of lookupChunk ids (one statement per chunk, a few per
// interval at the rates measured, against the sampler's fifty a second),
// and a job is READ_READY at the first sample showing its index. The
// result is committed before the view can show the job, so a job the view
// showed before the tick always has its result visible at the tick.
type series struct {
	r        *runner
	out      *csv.Writer
	interval time.Duration
	groups   seriesGroups
	procs    []cpuGroup

	mu    sync.Mutex
	fresh []pendingJob // submitted since the last tick

	pending []pendingJob // the tick's own
	usage   map[string]procTotals
}

type seriesGroups struct {
	executor   string
	projectors []string
}

func newSeries(r *runner, prefix string, run []cpuGroup) *series {
	return &series{
		r: r, out: csv.NewWriter(r.cfg.Series), interval: r.cfg.SeriesInterval,
		procs: seriesProcessGroups(r.cfg.SeriesProcesses, run),
		groups: seriesGroups{executor: prefix + executor.DefaultGroup, projectors: []string{
			prefix + projectors.DefaultGroupPrefix + docview.Name, prefix + projectors.DefaultGroupPrefix + indexer.Name}},
	}
}

// add records a job acknowledged (due at due); it counts as submitted in
// the interval it was acknowledged in.
func (s *series) add(j job) {
	s.mu.Lock()
	s.fresh = append(s.fresh, pendingJob{id: j.id.String(), doc: int(j.doc), ops: int(j.ops), due: j.submittedAt()})
	s.mu.Unlock()
}

// run writes the header, then a row every interval until ctx ends; the
// interval cut short by the end is not written.
func (s *series) run(ctx context.Context, start time.Time) error {
	s.usage = sampleProcesses(s.procs)
	if err := s.out.Write(seriesHeader(s.procs)); err != nil {
		return fmt.Errorf("writing the series: %w", err)
	}
	s.out.Flush()
	prev := start
	for i := 1; ; i++ {
		if err := sleepUntil(ctx, start.Add(time.Duration(i)*s.interval)); err != nil {
			return nil
		}
		now := time.Now()
		// The last tick falls at the end of the load, when ctx ends: it
		// still reads its figures, within an interval.
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.interval)
		row := s.tick(tctx, prev, now)
		cancel()
		row.Elapsed = now.Sub(start)
		prev = now
		if err := s.out.Write(row.csv()); err != nil {
			return fmt.Errorf("writing the series: %w", err)
		}
		s.out.Flush()
		if err := s.out.Error(); err != nil {
			return fmt.Errorf("writing the series: %w", err)
		}
	}
}

func (s *series) tick(ctx context.Context, from, now time.Time) SeriesRow {
	row := SeriesRow{Interval: now.Sub(from)}
	s.mu.Lock()
	fresh := s.fresh
	s.fresh = nil
	s.mu.Unlock()
	submitted := 0
	for _, j := range fresh {
		submitted += j.ops
	}
	s.pending = append(s.pending, fresh...)
	if err := s.readResults(ctx); err != nil && ctx.Err() == nil {
		s.r.cfg.Logger.Warn("the series could not read job results", zap.Error(err))
	}
	var lat []time.Duration
	var ready int
	s.pending, lat, ready = settle(s.pending, now, s.r.samp.reached)
	row.SubmittedOpsPerSec = perSecond(submitted, row.Interval)
	row.ReadReadyOpsPerSec = perSecond(ready, row.Interval)
	row.P50Ms, row.P99Ms = math.NaN(), math.NaN()
	if len(lat) > 0 {
		slices.Sort(lat)
		row.P50Ms, row.P99Ms = ms(percentile(lat, 50)), ms(percentile(lat, 99))
	}
	row.ExecutorLag, row.ExecutorLagSeconds, row.ProjectorLag, row.ProjectorLagSeconds = s.lag(ctx)
	usage := sampleProcesses(s.procs)
	row.Processes = processUsage(s.procs, s.usage, usage)
	s.usage = usage
	return row
}

// readResults reads the results of the pending jobs not yet known.
func (s *series) readResults(ctx context.Context) error {
	var unknown []*pendingJob
	for i := range s.pending {
		if !s.pending[i].known {
			unknown = append(unknown, &s.pending[i])
		}
	}
	ids := make([]string, 0, min(len(unknown), lookupChunk))
	for from := 0; from < len(unknown); from += lookupChunk {
		part := unknown[from:min(from+lookupChunk, len(unknown))]
		ids = ids[:0]
		for _, j := range part {
			ids = append(ids, j.id)
		}
		found, err := s.r.store.JobResults(ctx, ids)
		s.r.probes.Add(1)
		if err != nil {
			return err
		}
		for _, j := range part {
			res, ok := found[j.id]
			if !ok {
				continue
			}
			j.known = true
			if res.Status == oplog.JobFailed {
				j.index = math.MaxInt64 // never READ_READY; dropped by settle
			} else {
				j.index = tokenIndex(res, s.r.streams[j.doc])
			}
		}
	}
	return nil
}

// settle takes the jobs the view has shown by now out of pending and
// returns those left, the latencies of the ones taken (from when each was
// due), and the operations they carried. Failed jobs (index MaxInt64) are
// dropped without a latency; a job whose token names no index on its
// stream counts from the stream's first sample, as the report counts it.
func settle(pending []pendingJob, now time.Time, reached func(doc int, index int64) (time.Time, bool)) (left []pendingJob, lat []time.Duration, ops int) {
	left = pending[:0]
	for _, j := range pending {
		if !j.known {
			left = append(left, j)
			continue
		}
		if j.index == math.MaxInt64 {
			continue
		}
		at, ok := reached(j.doc, max(j.index, 0))
		if !ok || at.After(now) {
			left = append(left, j)
			continue
		}
		lat = append(lat, at.Sub(j.due))
		ops += j.ops
	}
	// Let the backing array shrink once most of it is free: at a steady
	// rate pending stays small, and a backlog should not pin its peak.
	if cap(left) > 1024 && len(left) < cap(left)/4 {
		left = slices.Clip(append([]pendingJob(nil), left...))
	}
	return left, lat, ops
}

// lag is the executor group's lag on the jobs topic and the furthest
// behind projector's on the write-ready topic, summed over partitions (the
// seconds: the oldest unconsumed record's age), from the groups' committed
// offsets. NaN when the brokers could not say.
func (s *series) lag(ctx context.Context) (exec, execSec, proj, projSec float64) {
	nan := math.NaN()
	lctx, cancel := context.WithTimeout(ctx, s.interval/2)
	defer cancel()
	lags, err := kafka.ConsumerLag(lctx, s.r.cfg.Kafka, append([]string{s.groups.executor}, s.groups.projectors...)...)
	if err != nil {
		if ctx.Err() == nil {
			s.r.cfg.Logger.Warn("the series could not read the consumer lag", zap.Error(err))
		}
		return nan, nan, nan, nan
	}
	return groupLag(lags, s.groups)
}

// groupLag folds per-partition lag into the executor's and the projectors'
// (the projector with the most records behind); a group with no committed
// offsets yet is NaN.
func groupLag(lags []kafka.PartitionLag, g seriesGroups) (exec, execSec, proj, projSec float64) {
	records := map[string]float64{}
	seconds := map[string]float64{}
	for _, l := range lags {
		records[l.Group] += float64(l.Lag)
		seconds[l.Group] = max(seconds[l.Group], l.LagSeconds)
	}
	exec, execSec, proj, projSec = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	if v, ok := records[g.executor]; ok {
		exec, execSec = v, seconds[g.executor]
	}
	for _, p := range g.projectors {
		if v, ok := records[p]; ok && (math.IsNaN(proj) || v > proj) {
			proj, projSec = v, seconds[p]
		}
	}
	return exec, execSec, proj, projSec
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return math.NaN()
	}
	return float64(n) / d.Seconds()
}

// seriesHeader names the columns; a process's columns end in its name.
func seriesHeader(procs []cpuGroup) []string {
	h := []string{"elapsed_s", "interval_s", "submitted_ops_per_s", "read_ready_ops_per_s",
		"read_ready_p50_ms", "read_ready_p99_ms", "executor_lag_records", "executor_lag_s",
		"projector_lag_records", "projector_lag_s"}
	for _, p := range procs {
		h = append(h, "rss_mib_"+p.name, "cpu_cores_"+p.name)
	}
	return h
}

func (row SeriesRow) csv() []string {
	out := []string{num(row.Elapsed.Seconds(), 1), num(row.Interval.Seconds(), 3),
		num(row.SubmittedOpsPerSec, 1), num(row.ReadReadyOpsPerSec, 1),
		num(row.P50Ms, 1), num(row.P99Ms, 1), num(row.ExecutorLag, 0), num(row.ExecutorLagSeconds, 3),
		num(row.ProjectorLag, 0), num(row.ProjectorLagSeconds, 3)}
	for _, p := range row.Processes {
		rss := math.NaN()
		if p.RSSBytes >= 0 {
			rss = float64(p.RSSBytes) / (1 << 20)
		}
		out = append(out, num(rss, 1), num(p.CPUCores, 3))
	}
	return out
}

// num formats a figure for the CSV, NaN as an empty cell.
func num(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
