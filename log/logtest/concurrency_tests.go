package logtest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

func testMutualGuardsOneLands(t *testing.T, h Harness) {
	s := h.NewStore(t)
	const rounds = 40
	for round := range rounds {
		x, y := stream(oplog.ScopeGlobal), stream(oplog.ScopeGlobal)
		reqs := []oplog.AppendRequest{
			request(x, 0, 1, oplog.ConditionStream{Stream: y, Revision: 0}),
			request(y, 0, 1, oplog.ConditionStream{Stream: x, Revision: 0}),
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Go(func() {
				res, err := s.Append(ctx(t), reqs[i:i+1])
				if err != nil {
					errs[i] = err
					return
				}
				errs[i] = res[0].Err
			})
		}
		wg.Wait()
		landed := 0
		for _, err := range errs {
			if err == nil {
				landed++
				continue
			}
			var cf *oplog.AppendConditionFailed
			require.ErrorAs(t, err, &cf, "round %d", round)
		}
		require.Equal(t, 1, landed, "round %d: exactly one of two mutually guarded appends lands", round)
		require.Equal(t, 1, len(readAll(t, s, x))+len(readAll(t, s, y)), "round %d", round)
	}
}

func testOppositeReadSetOrders(t *testing.T, h Harness) {
	s := h.NewStore(t)
	shared := make([]oplog.StreamKey, 6)
	for i := range shared {
		shared[i] = stream(oplog.ScopeDocument)
	}
	const workers, perWorker = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for range perWorker {
				own := stream(oplog.ScopeGlobal)
				cond := make([]oplog.ConditionStream, len(shared))
				for i, k := range shared {
					cond[i] = oplog.ConditionStream{Stream: k, Revision: 0}
				}
				if w%2 == 1 { // the reverse order
					for i, j := 0, len(cond)-1; i < j; i, j = i+1, j-1 {
						cond[i], cond[j] = cond[j], cond[i]
					}
				}
				res, err := s.Append(ctx(t), []oplog.AppendRequest{request(own, 0, 1, cond...)})
				if err != nil {
					errs <- err
					continue
				}
				errs <- res[0].Err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "read-sets in opposite orders neither deadlock nor conflict")
	}
}

// testConcurrentOverlappingAppends runs 8 writers over a small set of
// documents, each append guarded by a read-set of other documents' streams.
// Every failure must be a typed conflict, and at the end every stream is
// contiguous and holds exactly the operations that were reported written.
func testConcurrentOverlappingAppends(t *testing.T, h Harness) {
	s := h.NewStore(t)
	const (
		writers  = 8
		appends  = 300 // per writer: 2,400 in all
		nstreams = 12
	)
	keys := make([]oplog.StreamKey, nstreams)
	for i := range keys {
		keys[i] = stream(oplog.ScopeGlobal)
	}
	var mu sync.Mutex
	var landed []oplog.AppendResult
	written := map[oplog.StreamKey]map[string]bool{}
	for _, k := range keys {
		written[k] = map[string]bool{}
	}
	var wg sync.WaitGroup
	failures := make(chan error, writers*appends)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range appends {
				batch := make([]oplog.AppendRequest, 0, 3)
				used := map[string]bool{}
				for range 1 + rng.IntN(3) {
					k := keys[rng.IntN(nstreams)]
					if used[k.DocumentID] {
						continue
					}
					used[k.DocumentID] = true
					head, err := s.ReadStream(ctx(t), k, 0, 0)
					if err != nil {
						failures <- err
						return
					}
					c := keys[rng.IntN(nstreams)]
					cHead, err := s.ReadStream(ctx(t), c, 0, 0)
					if err != nil {
						failures <- err
						return
					}
					batch = append(batch, request(k, int64(len(head)), 1+rng.IntN(3),
						oplog.ConditionStream{Stream: c, Revision: int64(len(cHead))}))
				}
				res, err := s.Append(ctx(t), batch)
				if err != nil {
					failures <- fmt.Errorf("batch error: %w", err)
					return
				}
				for i, r := range res {
					if r.Err != nil {
						if !oplog.IsConflict(r.Err) {
							failures <- fmt.Errorf("untyped or unexpected failure: %w", r.Err)
						}
						continue
					}
					mu.Lock()
					landed = append(landed, r)
					for _, op := range r.Operations {
						written[batch[i].Streams[0].Stream][op.OpID] = true
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		require.NoError(t, err)
	}
	total := 0
	for _, k := range keys {
		got := readAll(t, s, k)
		requireContiguous(t, got, len(got))
		ids := map[string]bool{}
		for _, op := range got {
			require.False(t, ids[op.OpID], "no duplicate in %s", k)
			ids[op.OpID] = true
		}
		require.Equal(t, written[k], ids, "%s holds exactly the operations reported written", k)
		total += len(got)
	}
	require.Positive(t, total)
	for _, r := range landed[:min(len(landed), 200)] {
		requireAsStored(t, s, r)
	}
}
