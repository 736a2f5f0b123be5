package executor

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/backoff"
)

// clock is the executor's clock for job timeouts: time since Start
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
