package analytics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
)

// TestApplyRows checks the rows one batch leaves: every operation with its
// columns, and a documents row built from the changed streams and the stored
// heads of the others.
func TestApplyRows(t *testing.T) {
	t.Parallel()
	p := newProjector(t)
	w := newWriter(t)
	tx := &fakeTx{heads: map[oplog.StreamKey]projectors.Head{}}

	apply(t, p, tx, merge(w.create("d1", "first"), w.patch("d1", oplog.ScopeGlobal, 1), w.patch("d1", oplog.ScopeGlobal, 2))...)
	// Only the local scope changes: the documents row still carries the
	// header and the global revision, read from the stored heads.
	apply(t, p, tx, w.patch("d1", oplog.ScopeLocal, 3))

	db := p.Database()
	ops := query(t, p, "SELECT scope, idx, document_type, action_type, ordinal, skip, model_version, written_at_utc_ms - timestamp_utc_ms, "+
		"position(action_json, '\"type\":\"MERGE_PATCH\"') > 0 FROM "+db+".operations FINAL ORDER BY ordinal")
	require.Equal(t, [][]string{
		{"document", "0", "doclog/json", "CREATE_DOCUMENT", "1", "0", "1", "40", "0"},
		{"global", "0", "doclog/json", "MERGE_PATCH", "2", "0", "1", "40", "1"},
		{"global", "1", "doclog/json", "MERGE_PATCH", "3", "0", "1", "40", "1"},
		{"local", "0", "doclog/json", "MERGE_PATCH", "4", "0", "1", "40", "1"},
	}, ops)

	docs := query(t, p, "SELECT document_id, document_type, name, slug, is_deleted, revision_document, revision_global, revision_local, "+
		"operation_count, last_ordinal, last_modified_utc_ms = (SELECT max(timestamp_utc_ms) FROM "+db+".operations) FROM "+db+".documents FINAL")
	require.Equal(t, [][]string{{"d1", "doclog/json", "doc d1", "first", "0", "1", "2", "1", "4", "4", "1"}}, docs)

	apply(t, p, tx, w.remove("d1"))
	docs = query(t, p, "SELECT is_deleted, deleted_at_utc_ms > created_at_utc_ms, operation_count FROM "+db+".documents FINAL")
	require.Equal(t, [][]string{{"1", "1", "5"}}, docs)
}

// TestApplyTwiceChangesNoCount applies the same batches again, as a crash
// between the ClickHouse insert and the Postgres commit would, and out of
// order: deduplicated counts and the documents rows do not change.
func TestApplyTwiceChangesNoCount(t *testing.T) {
	t.Parallel()
	p := newProjector(t)
	w := newWriter(t)
	tx := &fakeTx{heads: map[oplog.StreamKey]projectors.Head{}}
	var batches [][]projectors.Change
	for _, doc := range []string{"a", "b", "c"} {
		batches = append(batches, merge(w.create(doc, doc), w.patch(doc, oplog.ScopeGlobal, 1)))
	}
	batches = append(batches, []projectors.Change{w.patch("a", oplog.ScopeGlobal, 2), w.patch("b", oplog.ScopeLocal, 2)})
	batches = append(batches, []projectors.Change{w.remove("c")})
	for _, b := range batches {
		apply(t, p, tx, b...)
	}
	db := p.Database()
	countsBefore := query(t, p, "SELECT document_id, count() FROM "+db+".operations FINAL GROUP BY document_id ORDER BY document_id")
	require.Equal(t, [][]string{{"a", "3"}, {"b", "3"}, {"c", "3"}}, countsBefore)
	docsBefore := query(t, p, "SELECT document_id, operation_count, is_deleted FROM "+db+".documents FINAL ORDER BY document_id")

	// The stored heads are those of the end; replaying an earlier batch
	// rebuilds its rows from them, as a re-delivery after a crash would.
	for i := len(batches) - 1; i >= 0; i-- {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		require.NoError(t, p.Apply(ctx, tx, batches[i]))
		cancel()
	}
	for _, b := range batches {
		apply(t, p, tx, b...)
	}
	// The copies stay until a background merge, which may already have run.
	require.GreaterOrEqual(t, scalar(t, p, "SELECT count() FROM "+db+".operations"), uint64(9))
	require.Equal(t, countsBefore, query(t, p, "SELECT document_id, count() FROM "+db+".operations FINAL GROUP BY document_id ORDER BY document_id"))
	require.Equal(t, countsBefore, query(t, p, "SELECT document_id, uniqExact(scope, branch, idx) FROM "+db+".operations GROUP BY document_id ORDER BY document_id"))
	require.Equal(t, docsBefore, query(t, p, "SELECT document_id, operation_count, is_deleted FROM "+db+".documents FINAL ORDER BY document_id"))

	counts, err := p.OperationCounts(context.Background(), oplog.DefaultBranch)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"a": 3, "b": 3, "c": 3}, counts)

	// A merge removes the copies for good. OPTIMIZE … FINAL does nothing
	// when a background merge holds the parts (ClickHouse 18.16 says so only
	// with optimize_throw_if_noop), so it is asked again until it ran.
	var rows uint64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		require.NoError(t, p.Conn().Exec(context.Background(), "OPTIMIZE TABLE "+db+".operations FINAL"))
		if rows = scalar(t, p, "SELECT count() FROM "+db+".operations"); rows == 9 || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, uint64(9), rows, "a final merge leaves the 9 distinct operations")
}

// TestApplyInsertError reports an insert ClickHouse refused as *InsertError.
// and counts it.
func TestApplyInsertError(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := newProjector(t, func(c *analytics.Config) { c.Registerer = reg })
	w := newWriter(t)
	tx := &fakeTx{heads: map[oplog.StreamKey]projectors.Head{}}
	apply(t, p, tx, merge(w.create("x", "x"), w.patch("x", oplog.ScopeGlobal, 1))...)
	require.Equal(t, map[string]float64{"documents count": 1, "documents sum": 1, "operations count": 1, "operations sum": 2},
		gathered(t, reg, "doclog_analytics_insert_rows"))

	require.NoError(t, p.Conn().Exec(context.Background(), "DROP TABLE "+p.Database()+".operations"))
	err := p.Apply(context.Background(), tx, []projectors.Change{w.patch("x", oplog.ScopeGlobal, 2)})
	var ie *analytics.InsertError
	require.True(t, errors.As(err, &ie), "got %v", err)
	require.Equal(t, analytics.TableOperations, ie.Table)
	require.Equal(t, 1, ie.Rows)
	require.Equal(t, map[string]float64{"operations": 1}, gathered(t, reg, "doclog_analytics_insert_errors_total"))
}

// gathered reads a metric family by table: a counter's value, or a
// histogram's sample count and sum.
func gathered(t testing.TB, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			table := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" {
					table = l.GetValue()
				}
			}
			if h := m.GetHistogram(); h != nil {
				out[table+" count"] = float64(h.GetSampleCount())
				out[table+" sum"] = h.GetSampleSum()
				continue
			}
			out[table] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestRunnerConfig checks how the batch bounds reach the runner: the poll
// size, and fetch options placed before the caller's so the caller's win.
func TestRunnerConfig(t *testing.T) {
	t.Parallel()
	p := newProjector(t, func(c *analytics.Config) { c.BatchRows = 123 })
	callers := kgo.FetchMaxWait(50 * time.Millisecond)
	rc := p.RunnerConfig(projectors.Config{KafkaOptions: []kgo.Opt{callers}})
	require.Same(t, p, rc.Projector)
	require.Equal(t, 123, rc.MaxPollRecords)
	require.Len(t, rc.KafkaOptions, 4)
	require.Equal(t, fmt.Sprint(callers), fmt.Sprint(rc.KafkaOptions[3]))

	rc = p.RunnerConfig(projectors.Config{MaxPollRecords: 7})
	require.Equal(t, 7, rc.MaxPollRecords)
	require.Len(t, rc.KafkaOptions, 3)
	require.NoError(t, rc.WithDefaults().Projector.(*analytics.Projector).Ping(context.Background()))

	// The client accepts the options (it validates them without dialing).
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, rc.KafkaOptions...)...)
	require.NoError(t, err)
	cl.Close()
}
