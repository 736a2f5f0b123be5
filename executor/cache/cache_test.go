package cache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor/cache"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

const (
	ledgerType = "doclog/ledger"
	jsonType   = "doclog/json"
	global     = oplog.ScopeGlobal
)

func createLedger(w *writer) {
	w.must(w.action(oplog.ScopeDocument, model.ActionCreateDocument, `{}`))
	w.must(w.action(global, "OPEN_ACCOUNT", `{"accountId":"a","initialBalance":1000}`))
	w.must(w.action(global, "OPEN_ACCOUNT", `{"accountId":"b"}`))
}

func TestConfig(t *testing.T) {
	t.Parallel()
	cfg := cache.Config{}.WithDefaults()
	require.Equal(t, cache.Config{MaxStreams: 10000, MaxBytes: 64 << 20, KeyframeInterval: 10, ReadPageSize: 1000}, cfg)
	require.NoError(t, cfg.Validate())
	for _, bad := range []cache.Config{
		{MaxStreams: -1}, {MaxBytes: 10}, {KeyframeInterval: -2}, cache.Config{}.WithHistorySize(-1), {ReadPageSize: -5},
	} {
		require.Error(t, bad.WithDefaults().Validate(), "%+v", bad)
	}
	_, err := cache.New(nil, nil, cache.Config{})
	require.ErrorContains(t, err, "store and registry are required")
}

// A cold miss reads the nearest keyframe and only the operations after it,
// and the state equals a replay from index 0.
func TestColdMissReadsOnlySinceKeyframe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.cache(t, cache.Config{NoKeyframeOnRebuild: true})
	w := b.writer(t, c, 0, "doc-cold", ledgerType)
	createLedger(w) // global ops 0, 1
	for i := range 23 {
		w.must(w.action(global, "TRANSFER", fmt.Sprintf(`{"fromAccountId":"a","toAccountId":"b","amount":%d}`, i+1)))
	}
	key := w.key(global)
	all := b.allOps(t, key)
	require.Len(t, all, 25)
	kfs, err := b.store.ListKeyframes(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, []int64{9, 19}, []int64{kfs[0].Index, kfs[1].Index}, "keyframes every 10 revisions, labelled by their last index")

	fresh := b.cache(t, cache.Config{NoKeyframeOnRebuild: true})
	b.store.reset()
	st, err := fresh.Load(context.Background(), 0, key, ledgerType)
	require.NoError(t, err)
	require.Equal(t, int64(5), b.store.opsRead.Load(), "only operations 20-24 are read")
	require.Equal(t, int64(1), fresh.Stats().KeyframeRebuilds)

	full, err := b.reg.ReplayStream(key, ledgerType, all)
	require.NoError(t, err)
	require.Equal(t, full.Hash, st.Hash)
	require.Equal(t, all[24].Hash, st.Hash)
	require.Equal(t, full.Revision, st.Revision)
	require.True(t, model.EqualJSON(full.State, st.State))

	// The second load is a hit: nothing is read.
	b.store.reset()
	again, err := fresh.Load(context.Background(), 0, key, ledgerType)
	require.NoError(t, err)
	require.Zero(t, b.store.opsRead.Load()+b.store.kfLookups.Load())
	require.Equal(t, st.Hash, again.Hash)
	require.Equal(t, int64(1), fresh.Stats().Hits)
}

// Without keyframes a cold miss replays from index 0 and then persists one,
// so the next cold miss is short.
func TestColdMissWithoutKeyframe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.cache(t, cache.Config{KeyframeInterval: 1000})
	w := b.writer(t, c, 0, "doc-nokf", ledgerType)
	createLedger(w)
	for range 12 {
		w.must(w.action(global, "DEPOSIT", `{"accountId":"b","amount":3}`))
	}
	key := w.key(global)
	kfs, err := b.store.ListKeyframes(context.Background(), key)
	require.NoError(t, err)
	require.Empty(t, kfs)

	fresh := b.cache(t, cache.Config{KeyframeInterval: 10})
	b.store.reset()
	st, err := fresh.Load(context.Background(), 0, key, ledgerType)
	require.NoError(t, err)
	require.Equal(t, int64(14), b.store.opsRead.Load())
	require.Equal(t, int64(1), fresh.Stats().FullRebuilds)
	require.Equal(t, int64(1), b.store.keyframesPut.Load())

	fresh2 := b.cache(t, cache.Config{})
	b.store.reset()
	st2, err := fresh2.Load(context.Background(), 0, key, ledgerType)
	require.NoError(t, err)
	require.Zero(t, b.store.opsRead.Load(), "the keyframe written by the first rebuild is the head")
	require.Equal(t, st.Hash, st2.Hash)
}

// A cold miss of a large stream writes a keyframe at the head only once it
// replayed a keyframe spacing of the stream's size (model.KeyframeSpacing):
// 14 operations replayed are past the interval of 10 but short of the 20 of
// a state over 128 KiB, and 24 are past it.
func TestColdMissKeyframesALargeStreamBySize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.cache(t, cache.Config{KeyframeInterval: 1000})
	w := b.writer(t, c, 0, "doc-large", jsonType)
	w.must(w.action(oplog.ScopeDocument, model.ActionCreateDocument, `{}`))
	w.must(w.action(global, "MERGE_PATCH", `{"body":"`+strings.Repeat("x", model.KeyframeBytes)+`"}`))
	edit := func(n int) {
		for i := range n {
			w.must(w.action(global, "MERGE_PATCH", fmt.Sprintf(`{"n":%d}`, i)))
		}
	}
	edit(13)
	key := w.key(global)

	fresh := b.cache(t, cache.Config{KeyframeInterval: 10})
	b.store.reset()
	st, err := fresh.Load(context.Background(), 0, key, jsonType)
	require.NoError(t, err)
	require.Equal(t, int64(14), st.Revision)
	require.Equal(t, int64(20), model.KeyframeSpacing(10, st.Size))
	require.Zero(t, b.store.keyframesPut.Load(), "14 replayed, short of the spacing of 20")

	edit(10)
	fresh = b.cache(t, cache.Config{KeyframeInterval: 10})
	b.store.reset()
	st, err = fresh.Load(context.Background(), 0, key, jsonType)
	require.NoError(t, err)
	require.Equal(t, int64(24), st.Revision)
	require.Equal(t, int64(1), b.store.keyframesPut.Load(), "24 replayed, past the spacing")
	kfs, err := b.store.ListKeyframes(context.Background(), key)
	require.NoError(t, err)
	require.Len(t, kfs, 1)
	require.Equal(t, int64(23), kfs[0].Index)
	require.Equal(t, st.Hash, kfs[0].Hash)
}

// A keyframe that does not verify is passed over: the rebuild starts from
// index 0 and still yields the right state.
func TestBadKeyframeFallsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.cache(t, cache.Config{})
	w := b.writer(t, c, 0, "doc-badkf", ledgerType)
	createLedger(w)
	for range 10 {
		w.must(w.action(global, "DEPOSIT", `{"accountId":"a","amount":1}`))
	}
	key := w.key(global)
	kfs, err := b.store.ListKeyframes(context.Background(), key)
	require.NoError(t, err)
	require.NotEmpty(t, kfs)
	bad := kfs[len(kfs)-1]
	bad.State = []byte(`{"accounts":{},"transferCount":99}`)
	require.NoError(t, b.store.Store.PutKeyframe(context.Background(), bad))

	fresh := b.cache(t, cache.Config{NoKeyframeOnRebuild: true})
	b.store.reset()
	st, err := fresh.Load(context.Background(), 0, key, ledgerType)
	require.NoError(t, err)
	require.Equal(t, int64(12), b.store.opsRead.Load())
	require.Equal(t, int64(1), fresh.Stats().BadKeyframes)
	all := b.allOps(t, key)
	require.Equal(t, all[len(all)-1].Hash, st.Hash)
}

// Property: for random action sequences, the state the cache gives at random
// revisions (through the nearest keyframe) equals a full replay, and every
// operation's hash equals the hash of the replayed state.
func TestStateAtEqualsFullReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 11))
		c := b.cache(t, cache.Config{KeyframeInterval: int64(3 + rng.IntN(6))})
		w := b.writer(t, c, 0, fmt.Sprintf("doc-prop-%d", seed), jsonType)
		w.must(w.action(oplog.ScopeDocument, model.ActionCreateDocument, `{}`))
		keys := []string{"a", "b", "c", "é", "\U0001F600"}
		for range 60 {
			k := keys[rng.IntN(len(keys))]
			var a oplog.Action
			if rng.IntN(2) == 0 {
				a = w.action(global, "MERGE_PATCH", fmt.Sprintf(`{%q:{"n":%d,"f":%g}}`, k, rng.IntN(100), rng.Float64()*1e-7))
			} else {
				a = w.action(global, "JSON_PATCH", fmt.Sprintf(`[{"op":"add","path":"/%s","value":[%d]}]`, k, rng.IntN(9)))
			}
			require.NoError(t, w.job(a))
		}
		key := w.key(global)
		all := b.allOps(t, key)
		require.Len(t, all, 60)
		for range 10 {
			rev := int64(rng.IntN(61))
			fresh := b.cache(t, cache.Config{})
			got, err := fresh.StateAt(context.Background(), key, jsonType, rev)
			require.NoError(t, err)
			want, err := b.reg.ReplayStream(key, jsonType, all[:rev])
			require.NoError(t, err)
			require.Equal(t, rev, got.Revision)
			require.Equal(t, want.Hash, got.Hash, "seed %d revision %d", seed, rev)
			require.True(t, model.EqualJSON(want.State, got.State))
			if rev > 0 {
				require.Equal(t, all[rev-1].Hash, got.Hash)
			}
		}
		_, err := c.StateAt(context.Background(), key, jsonType, 61)
		require.ErrorContains(t, err, "has only 60 operations")
	}
}

// The bounds hold after every step: never more streams than MaxStreams,
// never more weight than MaxBytes.
func TestBoundsHold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const maxStreams, maxBytes = 6, 6000
	c := b.cache(t, cache.Config{MaxStreams: maxStreams, MaxBytes: maxBytes})
	var ws []*writer
	for i := range 12 {
		ws = append(ws, b.writer(t, c, int32(i%3), fmt.Sprintf("doc-bound-%d", i), jsonType))
	}
	check := func() {
		s := c.Stats()
		require.LessOrEqual(t, s.Streams, maxStreams)
		require.LessOrEqual(t, s.Bytes, int64(maxBytes))
	}
	for _, w := range ws {
		w.must(w.action(oplog.ScopeDocument, model.ActionCreateDocument, `{}`))
		check()
	}
	for round := range 5 {
		for i, w := range ws {
			// States grow until some no longer fit beside the others.
			w.must(w.action(global, "MERGE_PATCH", fmt.Sprintf(`{"k%d":%q}`, round, strings.Repeat("x", 100*(i+1)))))
			check()
		}
	}
	// A state heavier than the whole bound is not held at all.
	big := ws[0]
	big.must(big.action(global, "MERGE_PATCH", fmt.Sprintf(`{"big":%q}`, strings.Repeat("y", maxBytes))))
	check()
	s := c.Stats()
	require.Positive(t, s.Evictions)
	require.Positive(t, s.Misses)
	// Evicted streams still load correctly.
	for _, w := range ws {
		st, err := c.Load(context.Background(), w.partition, w.key(global), jsonType)
		require.NoError(t, err)
		all := b.allOps(t, w.key(global))
		require.Equal(t, all[len(all)-1].Hash, st.Hash)
		check()
	}
}

func TestDropPartition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.cache(t, cache.Config{})
	w1 := b.writer(t, c, 1, "doc-p1", ledgerType)
	w2 := b.writer(t, c, 2, "doc-p2", ledgerType)
	createLedger(w1)
	createLedger(w2)
	require.Equal(t, 4, c.Stats().Streams)
	require.Equal(t, 2, c.DropPartition(1))
	require.Equal(t, 0, c.DropPartition(1))
	require.Equal(t, 2, c.Stats().Streams)

	b.store.reset()
	_, err := c.Load(context.Background(), 2, w2.key(global), ledgerType)
	require.NoError(t, err)
	require.Zero(t, b.store.kfLookups.Load(), "partition 2 is still held")
	_, err = c.Load(context.Background(), 1, w1.key(global), ledgerType)
	require.NoError(t, err)
	require.Equal(t, int64(1), b.store.kfLookups.Load(), "partition 1 was dropped")

	c.Invalidate(w2.key(global))
	require.Equal(t, 2, c.Stats().Streams)
}

// Load hands out a copy: changing it does not change the held head, and a
// failed job leaves the cache as it was.
func TestLoadReturnsPrivateCopy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.cache(t, cache.Config{})
	w := b.writer(t, c, 0, "doc-copy", ledgerType)
	createLedger(w)
	err := w.job(w.action(global, "WITHDRAW", `{"accountId":"b","amount":1}`))
	require.Equal(t, model.NameBusinessRuleViolation, model.ErrorName(err))

	st, err := c.Load(context.Background(), 0, w.key(global), ledgerType)
	require.NoError(t, err)
	st.State.(map[string]any)["accounts"] = nil
	again, err := c.Load(context.Background(), 0, w.key(global), ledgerType)
	require.NoError(t, err)
	require.NotNil(t, again.State.(map[string]any)["accounts"])
	require.Equal(t, int64(2), again.Revision)

	// An older state never replaces a newer head.
	old := model.NewStreamState(w.key(global), ledgerType)
	c.Put(0, old)
	again, err = c.Load(context.Background(), 0, w.key(global), ledgerType)
	require.NoError(t, err)
	require.Equal(t, int64(2), again.Revision)
}

// LoadShared hands out the held head itself, Load a copy of it.
func TestLoadSharedHandsOutTheHeldHead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.cache(t, cache.Config{})
	w := b.writer(t, c, 0, "doc-shared", ledgerType)
	createLedger(w)
	ctx := context.Background()
	held, err := c.LoadShared(ctx, 0, w.key(global), ledgerType)
	require.NoError(t, err)
	again, err := c.LoadShared(ctx, 0, w.key(global), ledgerType)
	require.NoError(t, err)
	require.Same(t, held, again)
	private, err := c.Load(ctx, 0, w.key(global), ledgerType)
	require.NoError(t, err)
	require.NotSame(t, held, private)
	require.Equal(t, held.Hash, private.Hash)
	require.Equal(t, held.State, private.State)
}

// With a history ring, recent past revisions are served without reading the
// log.
func TestHistoryRing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.cache(t, cache.Config{}.WithHistorySize(3))
	w := b.writer(t, c, 0, "doc-ring", ledgerType)
	createLedger(w)
	for range 5 {
		w.must(w.action(global, "DEPOSIT", `{"accountId":"a","amount":1}`))
	}
	key := w.key(global)
	all := b.allOps(t, key)
	b.store.reset()
	for _, rev := range []int64{7, 6, 5, 4} {
		st, err := c.StateAt(context.Background(), key, ledgerType, rev)
		require.NoError(t, err)
		require.Equal(t, all[rev-1].Hash, st.Hash)
	}
	require.Zero(t, b.store.kfLookups.Load(), "head and three older snapshots are held")
	st, err := c.StateAt(context.Background(), key, ledgerType, 3)
	require.NoError(t, err)
	require.Equal(t, all[2].Hash, st.Hash)
	require.Equal(t, int64(1), b.store.kfLookups.Load())
}

// Per-partition workers share one cache; run with -race.
func TestConcurrentPartitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.cache(t, cache.Config{MaxStreams: 10})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for p := range int32(4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range 3 {
				w := b.writer(t, c, p, fmt.Sprintf("doc-c%d-%d", p, d), ledgerType)
				createLedger(w)
				for range 5 {
					if err := w.job(w.action(global, "TRANSFER", `{"fromAccountId":"a","toAccountId":"b","amount":7}`)); err != nil {
						errs <- err
						return
					}
				}
			}
			if p%2 == 0 {
				c.DropPartition(p)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, c.Stats().Streams, 10)
	for p := range int32(4) {
		for d := range 3 {
			key := oplog.StreamKey{DocumentID: fmt.Sprintf("doc-c%d-%d", p, d), Scope: global, Branch: oplog.DefaultBranch}
			st, err := c.Load(context.Background(), p, key, ledgerType)
			require.NoError(t, err)
			require.Equal(t, int64(7), st.Revision)
		}
	}
}
