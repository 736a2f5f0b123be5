package cache_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/doclog/doclog/executor/cache"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// benchStream writes a ledger whose global stream has 15 operations
// (keyframe at index 9, five operations after it) and a state of about 1 KB.
func benchStream(b *testing.B) (*bundle, oplog.StreamKey) {
	bd := setup(b)
	c := bd.cache(b, cache.Config{})
	w := bd.writer(b, c, 0, "doc-bench", ledgerType)
	w.must(w.action(oplog.ScopeDocument, model.ActionCreateDocument, `{}`))
	for i := range 10 {
		w.must(w.action(global, "OPEN_ACCOUNT", fmt.Sprintf(`{"accountId":"account-%d","name":"Account number %d","initialBalance":100000}`, i, i)))
	}
	for range 5 {
		w.must(w.action(global, "TRANSFER", `{"fromAccountId":"account-1","toAccountId":"account-2","amount":1}`))
	}
	return bd, w.key(global)
}

// BenchmarkLoad compares a hit (a private copy of the held head) with a cold
// miss (nearest keyframe and the five operations after it from Postgres,
// replayed and hash-checked).
func BenchmarkLoad(b *testing.B) {
	bd, key := benchStream(b)
	ctx := context.Background()
	b.Run("hit", func(b *testing.B) {
		c := bd.cache(b, cache.Config{})
		st, err := c.Load(ctx, 0, key, ledgerType)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Load(ctx, 0, key, ledgerType); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "loads/s")
		b.ReportMetric(float64(st.Size), "state-bytes")
	})
	b.Run("cold-miss", func(b *testing.B) {
		c := bd.cache(b, cache.Config{NoKeyframeOnRebuild: true})
		b.ReportAllocs()
		for b.Loop() {
			c.Invalidate(key)
			if _, err := c.Load(ctx, 0, key, ledgerType); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "loads/s")
	})
}
