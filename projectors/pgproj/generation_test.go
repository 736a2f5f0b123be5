package pgproj_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/pgproj"
)

// The switch of generations waits for an unfenced transaction that claimed
// a stream of the live projector (a reconciler's, a lift's) and runs the
// swap of outside tables only after it committed, so that transaction
// never has its writes on one generation and its commit on the other; a
// claim made while the switch runs waits for it. A swap that fails rolls
// the whole switch back.
func TestSwitchWaitsForClaims(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := pgmigrate.Migrate(ctx, pool, pgproj.RunnerMigrations())
	require.NoError(t, err)
	s := pgproj.New(pool)
	_, err = s.Assign(ctx, "live", 0)
	require.NoError(t, err)
	require.NoError(t, s.PrepareGeneration(ctx, "live_g1", nil, "g1", []projectors.Checkpoint{{Partition: 0, NextOffset: 0}}))
	k := oplog.StreamKey{DocumentID: "d", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}

	// A failed swap: nothing switched, the build's checkpoints are kept.
	ok, err := s.SwitchGeneration(ctx, "live", "live_g1", nil, "g1", func(context.Context) error { return context.DeadlineExceeded })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ok)
	cps, err := s.Checkpoints(ctx, "live_g1")
	require.NoError(t, err)
	require.Len(t, cps, 1)

	claimed, release := make(chan struct{}), make(chan struct{})
	// However the test ends, the claim commits, so the pool can close.
	let := sync.OnceFunc(func() { close(release) })
	defer let()
	claimDone := make(chan time.Time, 1)
	claimErr := make(chan error, 1)
	go func() {
		err := s.InTx(ctx, nil, func(tx projectors.Tx) error {
			if _, _, err := tx.Claim(ctx, "live", []oplog.StreamKey{k}, nil); err != nil {
				return err
			}
			close(claimed)
			<-release
			// The commit is sent after this: a swap that waited for it
			// runs later than now.
			claimDone <- time.Now()
			return nil
		})
		claimErr <- err
	}()
	<-claimed
	swapped := make(chan time.Time, 1)
	switchDone := make(chan error, 1)
	go func() {
		ok, err := s.SwitchGeneration(ctx, "live", "live_g1", nil, "g1", func(context.Context) error {
			swapped <- time.Now()
			return nil
		})
		if err == nil && !ok {
			err = context.Canceled
		}
		switchDone <- err
	}()
	select {
	case <-swapped:
		t.Fatal("the swap ran while a claim of the live projector was open")
	case <-time.After(300 * time.Millisecond):
	}
	let()
	committed := <-claimDone
	require.NoError(t, <-claimErr)
	require.NoError(t, <-switchDone)
	require.True(t, (<-swapped).After(committed), "the swap ran after the claim committed")
	cps, err = s.Checkpoints(ctx, "live_g1")
	require.NoError(t, err)
	require.Empty(t, cps, "the switch dropped the build's checkpoints")
}
