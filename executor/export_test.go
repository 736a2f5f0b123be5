package executor

import (
	"context"

	"github.com/doclog/doclog/executor/place"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// SetAfterAppend sets the hook that runs after each successful
// Store.Append and before anything is produced; a non-nil error stops the
// member as a crash would (see Config.afterAppend).
func (c *Config) SetAfterAppend(f func() error) { c.afterAppend = f }

// ReadStored is the executor's read of what placing in stream k at head
// needs (loadStored), under cfg's store, registry and skip threshold.
func ReadStored(ctx context.Context, cfg Config, k oplog.StreamKey, head *model.StreamState, ids []string) (*place.Stored, error) {
	e := &Executor{cfg: cfg.WithDefaults()}
	return e.readStored(ctx, k, head, ids)
}
