package feed

import (
	"context"
	"time"

	"github.com/doclog/doclog/internal/coalesce"
	oplog "github.com/doclog/doclog/log"
)

// EndLog is the part of the log the Hub polls.
type EndLog interface {
	TailEnd(ctx context.Context) (oplog.TailEnd, error)
}

// Hub wakes the subscribers that wait at the head of the tail: one
// TailEnd per interval while any waits, whatever their number
// (internal/coalesce), instead of each polling the tail.
type Hub struct {
	p *coalesce.Poller[struct{}, oplog.TailEnd]
}

// NewHub returns a hub polling log every interval.
func NewHub(log EndLog, interval time.Duration) *Hub {
	lookup := func(ctx context.Context, _ []struct{}) (map[struct{}]oplog.TailEnd, error) {
		end, err := log.TailEnd(ctx)
		if err != nil {
			return nil, err
		}
		return map[struct{}]oplog.TailEnd{{}: end}, nil
	}
	return &Hub{p: coalesce.New(lookup, coalesce.Config{Interval: interval, Batch: 1})}
}

// ErrClosed is what Wait returns once the hub is closed.
var ErrClosed = coalesce.ErrClosed

// Wait blocks until the log holds a row of transaction tx or a later one
// (it returns nil), ctx ends (ctx's error) or the hub closes (ErrClosed).
// It also returns the last end a poll saw during the wait (ok false when
// none did): one whose Last is below tx tells the caller that the log holds
// nothing from tx up to its Horizon.
func (h *Hub) Wait(ctx context.Context, tx uint64) (last oplog.TailEnd, ok bool, err error) {
	err = h.p.Wait(ctx, []struct{}{{}}, func(res map[struct{}]oplog.TailEnd, err error) bool {
		if err != nil {
			// A failed poll is tried again next round; the subscriber's
			// own read reports a lasting outage.
			return false
		}
		last, ok = res[struct{}{}], true
		// Last is 0 for an empty log, which holds no row of any tx.
		return last.Last != 0 && last.Last >= tx
	})
	return last, ok, err
}

// Close wakes every waiter with ErrClosed and stops polling.
func (h *Hub) Close() { h.p.Close() }
