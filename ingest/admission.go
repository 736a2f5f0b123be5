package ingest

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/record"
)

// Backlog is the executor group's backlog on the jobs topic, kept current
// in the background so that a submit reads it from memory;
// *kafka.BacklogWatcher implements it. A submit reserves its jobs before it
// is admitted (Reserve), releases them once refused or produced (Release),
// and reports those produced with their weight (Produced), which the next
// measurement counts.
type Backlog interface {
	Backlog() kafka.Backlog
	Reserve(n int)
	Release(n int)
	Produced(records, weight int)
}

// jobOverhead is what a job costs the executors beyond its operations, in
// operations: on the two-core machine of docs/benchmarks.md jobs of one
// action drain at about 4,000 a second and jobs of fifty at about 320
// (16,000 operations a second), about three operations' worth a job.
const jobOverhead = 3

// unmeasuredWork bounds the work waiting, in jobWeight's operations, while
// the group's capacity is not known yet (it is measured once the group has
// been busy for half a second): about half a second of the executors' work
// at the rates of docs/benchmarks.md. Without it, only the age bound held a
// closed loop starting on an idle group, and the first second admitted
// 1,700 jobs of fifty actions, four seconds of work.
const unmeasuredWork = 8000

// unmeasuredSeconds is how long unmeasuredWork takes at those rates.
const unmeasuredSeconds = 0.5

// jobWeight is the work a job stands for in the backlog's capacity: its
// operations and the overhead of a job.
func jobWeight(j *record.Job) int {
	return j.OperationCount() + jobOverhead
}

// The reasons a submit is refused for the backlog, the label of
// doclog_ingest_backpressure_refusals_total.
const (
	boundSeconds = "seconds"
	boundRecords = "records"
)

// maxRetryAfter caps Retry-After. A client told to wait for a stalled
// group's whole backlog asks again within ten seconds: a refusal costs a
// request, while a wait computed from a rate measured badly (a drain rate
// of the moment a group stalled) kept clients of a group that had recovered
// idle for tens of seconds.
const maxRetryAfter = 10 * time.Second

// aheadHeadroom is how many bounds' worth of work, at the group's
// measured capacity, may wait before the work ahead alone refuses a submit.
// The capacity is the fastest drain measured under the load admitted, so it
// is a lower bound, and the executors drain more the more waits (a poll's
// round trips are paid once for all it gathers). Admitting only the
// bound's worth at it held a group below what it drains, which then
// measured lower still: on three brokers with 1 ms links, mode single's
// closed loop settled at 64 jobs/s against 1,776 unbounded. With twice,
// a group that can drain more shows it; one that cannot lets jobs age past
// the bound, and the age bound refuses by measuring that, not estimating.
const aheadHeadroom = 2

// maxSpread bounds how far past the excess's own wait a refused client's
// slot may be (retrySlots).
const maxSpread = 2 * time.Second

// admission decides whether a submit may go ahead given the backlog b:
// nil when it may, else the 429 to answer, with the wait to advise (at
// least floor) and the bound passed. The time bound is passed when jobs
// older than it still wait (b.Older, measured against maxLag by the
// watcher), or when the jobs waiting are more than the group drains in
// aheadHeadroom × maxLag at its capacity (a job admitted now would wait
// longer); the records bound when the backlog exceeds it. A measurement
// older than stale (or none) is not acted on. spread, when set, turns the wait the excess
// needs into the one advised (retrySlots.wait).
func admission(b kafka.Backlog, maxRecords int64, maxLag, stale, floor time.Duration, now time.Time,
	spread func(d time.Duration, rate float64) time.Duration,
) (e *APIError, retryAfter time.Duration, bound string) {
	if b.MeasuredAt.IsZero() || now.Sub(b.MeasuredAt) > stale {
		return nil, 0, ""
	}
	// excess is how many records must drain before the backlog is within
	// every bound again.
	var (
		excess  int64
		ahead   bool // the time bound is passed by the work ahead, not by age
		allowed int64
	)
	if maxLag > 0 && b.Older > 0 {
		excess, bound = b.Older, boundSeconds
	}
	// The age alone passes the bound only once jobs have waited that long,
	// and a closed loop admitted until then has queued many times the
	// bound's worth of work: every job it queued then waits for all of it.
	// The work ahead, at the capacity, is refused before it ages; before a
	// capacity is measured, past unmeasuredWork. At least one job may
	// always wait, so that a slow group is never left idle.
	if maxLag > 0 {
		if b.Capacity > 0 {
			allowed = max(int64(aheadHeadroom*maxLag.Seconds()*b.Capacity), 1)
		} else {
			allowed = max(int64(unmeasuredWork/max(b.Weight, 1)), 1)
		}
		if b.Records-allowed > excess {
			excess, bound, ahead = b.Records-allowed, boundSeconds, true
		}
	}
	if maxRecords > 0 && b.Records > maxRecords && b.Records-maxRecords > excess {
		excess, bound = b.Records-maxRecords, boundRecords
	}
	if bound == "" {
		return nil, 0, ""
	}
	retryAfter = retryAfterFor(float64(excess), b, floor)
	if spread != nil {
		retryAfter = spread(retryAfter, drainRate(b))
	}
	msg := fmt.Sprintf("the executors are %d jobs behind", b.Records)
	if seconds, known := b.Seconds(); known {
		msg += fmt.Sprintf(" (about %s of work at the %.0f jobs/s they drain)", round(seconds), b.Capacity)
	}
	switch {
	case bound == boundSeconds && ahead && b.Capacity > 0:
		msg += fmt.Sprintf(", more than the %d they drain in twice the bound of %s", allowed, maxLag)
	case bound == boundSeconds && ahead:
		msg += fmt.Sprintf(", more than the %d that may wait before their drain rate is known", allowed)
	case bound == boundSeconds:
		msg += fmt.Sprintf(", %d of them waiting longer than the bound of %s", b.Older, maxLag)
	default:
		msg += fmt.Sprintf(", past the bound of %d jobs", maxRecords)
	}
	msg += fmt.Sprintf("; nothing was produced: retry after %s", retryAfter)
	return &APIError{Status: http.StatusTooManyRequests, Code: CodeExecutorLag, Message: msg}, retryAfter, bound
}

// retryAfterFor is the time the group needs to drain excess records, at
// drainRate, from floor (the watcher's interval: no fresher figure comes
// sooner) to maxRetryAfter.
func retryAfterFor(excess float64, b kafka.Backlog, floor time.Duration) time.Duration {
	ms := math.Ceil(excess / drainRate(b) * 1000)
	if ms >= float64(maxRetryAfter/time.Millisecond) {
		return maxRetryAfter
	}
	return max(time.Duration(ms)*time.Millisecond, floor)
}

// drainRate is the group's capacity; until one is measured, its current
// rate or the rate unmeasuredWork assumes, whichever is higher. The current
// rate of a group that has just started to work counts the idle seconds
// before in its window: taken alone, it told the clients of a group
// draining 5,000 jobs a second to come back in up to two seconds, and the
// group idled while they waited. The assumed rate only brings a refused
// client back sooner; what is admitted is still decided by the backlog.
func drainRate(b kafka.Backlog) float64 {
	if b.Capacity > 0 {
		return b.Capacity
	}
	return max(b.Rate, unmeasuredRate(b))
}

// unmeasuredRate is the rate in jobs a second at which unmeasuredWork
// drains in unmeasuredSeconds, at the backlog's weight per job.
func unmeasuredRate(b kafka.Backlog) float64 {
	return unmeasuredWork / unmeasuredSeconds / max(b.Weight, 1)
}

// retrySlots spreads the clients that refusals send away over the group's
// drain. Told only when the excess will have drained, every client refused
// meanwhile comes back at that moment, finds room for a few, and the rest
// are refused again: a closed loop of 200 clients sent each job about four
// times, the refusals (each a decoded and validated request) costing the
// executors' cores. Instead each refused client is given the next slot: no
// sooner than the excess needs, and one slot's drain time (its jobs at the
// group's rate) after the previous client's, up to maxSpread past what the
// excess needs, so that clients retrying without waiting cannot push the
// others' slots out of reach.
type retrySlots struct {
	mu   sync.Mutex
	next time.Time // the first free slot
}

// wait is the wait to advise a client of jobs jobs refused at now, of at
// least d, the group draining rate jobs a second (0: unknown, no spreading).
func (s *retrySlots) wait(now time.Time, d time.Duration, jobs int, rate float64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := now.Add(d)
	if s.next.After(at) {
		at = s.next
		if limit := now.Add(d + maxSpread); at.After(limit) {
			at = limit
		}
	}
	if rate > 0 {
		s.next = at.Add(time.Duration(float64(jobs) / rate * float64(time.Second)))
	}
	return min(at.Sub(now), maxRetryAfter)
}

// retryHeaders sets the two forms of a wait: Retry-After in whole seconds,
// rounded up, which is all HTTP's header can say, and Retry-After-Ms in
// milliseconds, the convention of APIs whose waits are shorter than a
// second. A client that reads only Retry-After waits up to a second more
// than it needs, and the executors idle meanwhile.
func retryHeaders(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
}

// round shows seconds to two significant places' worth of milliseconds.
func round(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Millisecond)
}

// refusedForBacklog answers 429 executor_lag, with Retry-After and
// Retry-After-Ms, when the backlog with the submit's n jobs is past a bound,
// and reports whether it did. A submit is checked after its validation,
// just before it is produced, so that bad input is told so at once rather
// than after waiting out a Retry-After.
//
// The jobs of an admitted submit are reserved in the backlog from here
// until the caller has produced them (settleReservation, for each): counted
// only once produced, every submit arriving in the meantime saw the same
// backlog, and a crowd of clients coming back from the same Retry-After was
// admitted whole, far past the bound.
func (h *Handler) refusedForBacklog(w http.ResponseWriter, r *http.Request, n int) bool {
	if h.backlog == nil {
		return false
	}
	h.backlog.Reserve(n)
	if h.cfg.MaxExecutorLag < 0 && h.cfg.MaxExecutorLagRecords < 0 {
		return false
	}
	stale := max(10*h.cfg.ExecutorLagInterval, 5*time.Second)
	floor := max(h.cfg.ExecutorLagInterval, 10*time.Millisecond)
	now := time.Now()
	spread := func(d time.Duration, rate float64) time.Duration { return h.slots.wait(now, d, max(n, 1), rate) }
	e, retryAfter, bound := admission(h.backlog.Backlog(), h.cfg.MaxExecutorLagRecords, h.cfg.MaxExecutorLag, stale, floor, now, spread)
	if e == nil {
		return false
	}
	h.backlog.Release(n)
	h.refusals.WithLabelValues(bound).Inc()
	retryHeaders(w.Header(), retryAfter)
	h.refuse(w, r, e)
	return true
}

// settleReservation releases the reservation of an admitted job once its
// produce returned, and counts it in the backlog when it was produced (ok).
func (h *Handler) settleReservation(job *record.Job, ok bool) {
	if h.backlog == nil {
		return
	}
	h.backlog.Release(1)
	if ok {
		h.backlog.Produced(1, jobWeight(job))
	}
}
