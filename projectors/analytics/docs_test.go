package analytics_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
)

// docQueries returns the ```sql blocks of docs/analytics.md.
func docQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/analytics.md")
	require.NoError(t, err)
	var out []string
	for _, part := range strings.Split(string(b), "```sql\n")[1:] {
		end := strings.Index(part, "```")
		require.GreaterOrEqual(t, end, 0, "unterminated sql block")
		out = append(out, strings.TrimSpace(part[:end]))
	}
	return out
}

// TestDocQueries runs every sample query of docs/analytics.md against the
// test server over a workload applied twice (so the tables hold copies),
// and checks the figures the workload determines.
func TestDocQueries(t *testing.T) {
	t.Parallel()
	p := newProjector(t)
	w := newWriter(t)
	tx := &fakeTx{heads: map[oplog.StreamKey]projectors.Head{}}
	var batches [][]projectors.Change
	const docs, deleted = 12, 3
	for i := range docs {
		id := fmt.Sprintf("doc-%02d", i)
		batches = append(batches, merge(w.create(id, id), w.patch(id, oplog.ScopeGlobal, i)))
		for j := range i % 4 {
			batches = append(batches, []projectors.Change{w.patch(id, oplog.ScopeLocal, j)})
		}
	}
	for i := range deleted {
		batches = append(batches, []projectors.Change{w.remove(fmt.Sprintf("doc-%02d", i))})
	}
	total := 0
	for _, b := range batches {
		for _, c := range b {
			total += len(c.Operations)
		}
	}
	for range 2 {
		for _, b := range batches {
			apply(t, p, tx, b...)
		}
	}

	queries := docQueries(t)
	require.Len(t, queries, 8)
	results := make([][][]string, len(queries))
	for i, q := range queries {
		results[i] = query(t, p, q)
		require.NotEmpty(t, results[i], "query %d returned nothing:\n%s", i, q)
	}
	sumColumn := func(rows [][]string, col int) int {
		n := 0
		for _, r := range rows {
			v, err := strconv.Atoi(r[col])
			require.NoError(t, err)
			n += v
		}
		return n
	}
	// Operations per type per day, with FINAL and with uniqExact.
	require.Equal(t, total, sumColumn(results[0], 2))
	require.Equal(t, results[0], results[1])
	require.Greater(t, len(results[0]), 1, "the workload spans several days")
	// The busiest documents have 5 operations: doc-02 (create, patch, 2 local
	// patches, delete) comes first of them by id.
	require.Equal(t, []string{"doc-02", "doclog/json", "5"}, results[2][0][:3])
	// The action mix covers every operation once.
	require.Equal(t, total, sumColumn(results[3], 2))
	// Created and deleted.
	require.Equal(t, docs, sumColumn(results[4], 1))
	require.Equal(t, deleted, sumColumn(results[4], 2))
	// Live and deleted per type.
	require.Equal(t, [][]string{{"doclog/json", strconv.Itoa(docs - deleted), strconv.Itoa(deleted), strconv.Itoa(total)}}, results[5])
	// Latency: every operation has a commit time 40ms after its timestamp,
	// and the projector inserted it later than that.
	require.Equal(t, strconv.Itoa(total), results[6][0][0])
	// Operations per document: one row per document.
	require.Len(t, results[7], docs)
	require.Equal(t, total, sumColumn(results[7], 2))

	// The OperationCounts helper agrees with the documented query.
	counts, err := p.OperationCounts(context.Background(), oplog.DefaultBranch)
	require.NoError(t, err)
	for _, r := range results[7] {
		require.Equal(t, r[2], strconv.FormatUint(counts[r[0]], 10))
	}
}
