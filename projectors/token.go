package projectors

import (
	"context"
	"fmt"
	"time"

	oplog "github.com/doclog/doclog/log"
)

// AppliedFunc returns the last applied index of each stream (-1 when none).
type AppliedFunc func(ctx context.Context, streams []oplog.StreamKey) (map[oplog.StreamKey]int64, error)

// Reached reports whether a projection has applied every coordinate of the
// token that serves picks (nil: all of them). A coordinate short of its
// index on a quarantined stream is a *QuarantinedError: it cannot be reached
// until the quarantine is lifted, so a reader answers 409 instead of
// waiting. Each projector's query API builds its consistency check on it.
func Reached(ctx context.Context, token oplog.ConsistencyToken, projector string, applied AppliedFunc, store Store,
	serves func(oplog.Coordinate) bool) (bool, error) {
	var coords []oplog.Coordinate
	for _, c := range token.Coordinates {
		if serves == nil || serves(c) {
			coords = append(coords, c)
		}
	}
	if len(coords) == 0 {
		return true, nil
	}
	streams := make([]oplog.StreamKey, len(coords))
	for i, c := range coords {
		streams[i] = c.Stream()
	}
	idx, err := applied(ctx, streams)
	if err != nil {
		return false, err
	}
	var behind []oplog.StreamKey
	for _, c := range coords {
		if i, ok := idx[c.Stream()]; !ok || i < c.Index {
			behind = append(behind, c.Stream())
		}
	}
	if len(behind) == 0 {
		return true, nil
	}
	qs, err := store.QuarantinesOf(ctx, projector, behind)
	if err != nil {
		return false, err
	}
	for _, k := range behind {
		if q, ok := qs[k]; ok {
			return false, &QuarantinedError{Projector: projector, Quarantine: q}
		}
	}
	return false, nil
}

// DefaultWaitInterval is how often Wait checks when given no interval.
const DefaultWaitInterval = 20 * time.Millisecond

// Wait calls check every interval until it reports true or an error, or ctx
// ends; the caller bounds the wait with ctx's deadline.
func Wait(ctx context.Context, interval time.Duration, check func(context.Context) (bool, error)) error {
	if interval <= 0 {
		interval = DefaultWaitInterval
	}
	for {
		ok, err := check(ctx)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for consistency token: %w", ctx.Err())
		case <-time.After(interval):
		}
	}
}
