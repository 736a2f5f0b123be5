package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor/cache"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// Three documents of ~20 KB share a cache that holds about one of them, so
// almost every job evicts another document's head and most loads rebuild
// from the nearest keyframe and the operations after it. Each job makes one
// small random change; after each, the head the cache holds hashes as a
// full recomputation does and as the log says, and at the end every stream
// replays from index 0 to the same hash.
func TestIncrementalHashThroughEvictions(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	c := bd.cache(t, cache.Config{MaxBytes: 30 << 10})
	r := rand.New(rand.NewPCG(11, 11))
	const docs, records = 3, 220
	ws := make([]*writer, docs)
	for d := range ws {
		ws[d] = bd.writer(t, c, 0, fmt.Sprint("doc-evict-", d), "doclog/json")
		w := ws[d]
		w.must(w.action(oplog.ScopeDocument, model.ActionCreateDocument, `{}`))
		fill := map[string]any{}
		for i := range records {
			fill[fmt.Sprintf("item-%04d", i)] = map[string]any{"title": "a record of moderate length", "n": i, "tags": []any{"x", "y"}}
		}
		raw, err := json.Marshal(fill)
		require.NoError(t, err)
		w.must(w.action(oplog.ScopeGlobal, "MERGE_PATCH", string(raw)))
	}
	for i := range 150 {
		w := ws[r.IntN(docs)]
		k := fmt.Sprintf("item-%04d", r.IntN(records+20))
		var patch string
		switch r.IntN(4) {
		case 0:
			patch = fmt.Sprintf(`{%q:null}`, k)
		case 1:
			patch = fmt.Sprintf(`{%q:{"title":"replaced","n":%d}}`, k, i)
		default:
			patch = fmt.Sprintf(`{%q:{"n":%d,"seen":{"at":%d}}}`, k, i, i)
		}
		w.must(w.action(oplog.ScopeGlobal, "MERGE_PATCH", patch))
		head, err := c.Load(context.Background(), 0, w.key(oplog.ScopeGlobal), "doclog/json")
		require.NoError(t, err)
		full, _, err := model.Hash(head.State)
		require.NoError(t, err)
		require.Equal(t, full, head.Hash, "job %d", i)
		ops := bd.allOps(t, w.key(oplog.ScopeGlobal))
		require.Equal(t, ops[len(ops)-1].Hash, head.Hash, "job %d", i)
	}
	require.Positive(t, c.Stats().Evictions)
	for _, w := range ws {
		k := w.key(oplog.ScopeGlobal)
		st, err := bd.reg.ReplayStream(k, "doclog/json", bd.allOps(t, k))
		require.NoError(t, err)
		head, err := c.Load(context.Background(), 0, k, "doclog/json")
		require.NoError(t, err)
		require.Equal(t, st.Hash, head.Hash)
	}
}
