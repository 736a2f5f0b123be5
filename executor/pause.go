package executor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// An operator pauses a partition of the jobs topic or a document type on the
// whole executor group (doclogctl jobs pause). The pauses live in the log's
// database, so they hold across member restarts and rebalances: a member
// reads them before its first batch and every pausePoll after. A paused job
// is not applied and stays unsettled in memory, in its place: the offset
// commit of its partition stops before it, so a crash or a rebalance
// re-delivers it, and its document's later jobs wait behind it. The records
// of a paused partition keep arriving until MaxParkedPerPartition holds them
// back. Resumed, they run in order as if they had just arrived. A batch under
// way when the pause is set finishes: a pause takes effect within pausePoll
// and one batch.

// pausePoll is how often a member reads the pauses in force.
const pausePoll = 2 * time.Second

// PauseSource is where a member reads the pauses in force; a Store that has
// the method (log/postgres.Store) is used as one.
type PauseSource interface {
	PausedTargets(ctx context.Context) ([]string, error)
}

// PartitionTarget names a pause of one partition of the jobs topic.
func PartitionTarget(p int32) string { return "partition:" + strconv.Itoa(int(p)) }

// TypeTarget names a pause of one document type.
func TypeTarget(documentType string) string { return "type:" + documentType }

// pauses is the set a member obeys.
type pauses struct {
	loaded bool
	at     time.Time
	parts  map[int32]bool
	types  map[string]bool
}

// refreshPauses reads the pauses in force when they are due. Until a first
// read succeeds the member applies nothing (the error ends the batch as an
// outage does); a later failed read keeps the set it has.
func (e *Executor) refreshPauses(ctx context.Context, now time.Time) error {
	src, ok := e.cfg.Store.(PauseSource)
	if !ok || (e.paused.loaded && now.Sub(e.paused.at) < pausePoll) {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, e.cfg.StoreTimeout)
	targets, err := src.PausedTargets(lctx)
	cancel()
	e.paused.at = now
	if err != nil {
		if !e.paused.loaded {
			return fmt.Errorf("read the executor pauses: %w", err)
		}
		e.log.Warn("reading the executor pauses failed: keeping the ones in force", zap.Error(err))
		return nil
	}
	next := pauses{loaded: true, at: now, parts: map[int32]bool{}, types: map[string]bool{}}
	for _, t := range targets {
		if v, ok := strings.CutPrefix(t, "partition:"); ok {
			if p, err := strconv.ParseInt(v, 10, 32); err == nil {
				next.parts[int32(p)] = true
				continue
			}
		}
		if v, ok := strings.CutPrefix(t, "type:"); ok && v != "" {
			next.types[v] = true
			continue
		}
		e.log.Warn("ignoring an executor pause of unknown form", zap.String("target", t))
	}
	if len(next.parts) != len(e.paused.parts) || len(next.types) != len(e.paused.types) || !e.paused.loaded {
		e.log.Info("executor pauses in force", zap.Strings("targets", targets))
	}
	e.paused = next
	return nil
}
