package projectors_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin/bench/pgprobe"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/projtest"
)

// rebuildOpsEnv sizes BenchmarkRebuild's log. The benchmark runs only when
// it is set: a log of a million operations takes minutes to build and to
// rebuild on two cores, more than `make bench` should spend unasked.
const rebuildOpsEnv = "DOCLOG_BENCH_REBUILD_OPS"

// rebuildCompareEnv, when set, adds a rebuild of the document view with one
// log read in flight at a time before the measured ones.
const rebuildCompareEnv = "DOCLOG_BENCH_REBUILD_COMPARE"

// rebuildOpsPerDocument is each document's operations: its creation and
// then MERGE_PATCH jobs of 50 actions cycling over 50 keys (W1's
// documents, about 400 bytes of state).
const rebuildOpsPerDocument = 101

// BenchmarkRebuild builds a log of $DOCLOG_BENCH_REBUILD_OPS operations
// (genuine hashes: the executor's reduce builds every job), rebuilds the
// document view and then the indexer from it with projectors.Rebuild (a
// new generation built from the log, caught up, switched in), and times,
// in the same run, a raw COPY of the log's operation rows and a raw COPY of
// the projection rows the rebuilds wrote. It reports the rebuild's
// operations/s and both ratios (docs/benchmarks.md, "Rebuild"); nothing is
// asserted about speed, only that the rebuilt tables hold every stream.
func BenchmarkRebuild(b *testing.B) {
	raw := os.Getenv(rebuildOpsEnv)
	if raw == "" {
		b.Skip(rebuildOpsEnv + " is not set (make bench-rebuild sets it)")
	}
	n, err := strconv.Atoi(raw)
	require.NoError(b, err, rebuildOpsEnv)
	docs := max(n/rebuildOpsPerDocument, 1)
	bd := &bundle{Env: projtest.New(b, docview.Migrations(), indexer.Migrations())}

	start := time.Now()
	ids := buildLog(b, bd.Env, docs)
	var ops int
	require.NoError(b, bd.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations`).Scan(&ops))
	b.Logf("log: %d documents, %d operations, built in %s", docs, ops, time.Since(start).Round(time.Millisecond))

	b.ResetTimer()
	if os.Getenv(rebuildCompareEnv) != "" {
		// The same rebuild with one log read in flight at a time, as
		// before the reads overlapped, for a before/after in one run.
		prev := projectors.SetLogReaders(1)
		t0 := time.Now()
		_, err := projectors.Rebuild(context.Background(), bd.Config(docview.Projector{}, "docview-bench-one-reader"))
		require.NoError(b, err)
		took := time.Since(t0)
		projectors.SetLogReaders(prev)
		b.Logf("rebuild docview with one log reader: %s, %.0f operations/s", took.Round(time.Millisecond), float64(ops)/took.Seconds())
		b.ReportMetric(float64(ops)/took.Seconds(), "docview-one-reader-ops/s")
	}
	var rebuilt time.Duration
	for _, p := range []projectors.Projector{docview.Projector{}, indexer.Projector{}} {
		cfg := bd.Config(p, p.Name()+"-bench")
		t0 := time.Now()
		rep, err := projectors.Rebuild(context.Background(), cfg)
		took := time.Since(t0)
		require.NoError(b, err, "rebuild %s", p.Name())
		rebuilt += took
		b.Logf("rebuild %s: %s (build %d streams healed, catch-up %s), %.0f operations/s",
			p.Name(), took.Round(time.Millisecond), rep.Built.Healed, rep.CatchUp.Round(time.Millisecond), float64(ops)/took.Seconds())
		b.ReportMetric(float64(ops)/took.Seconds(), p.Name()+"-ops/s")
	}
	b.StopTimer()

	var snapshots, indexed int
	require.NoError(b, bd.Pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM document_snapshots), (SELECT count(*) FROM documents)`).Scan(&snapshots, &indexed))
	require.GreaterOrEqual(b, snapshots, 2*docs, "every document's document and global scopes are in the view")
	require.Equal(b, docs, indexed, "every document is indexed")

	logCopy, err := pgprobe.CopyBaseline(context.Background(), bd.Pool, ids, 1000)
	require.NoError(b, err)
	require.Equal(b, ops, logCopy.Rows)
	projRows, projCopy := copyTables(b, bd.Pool, "document_snapshots", "slug_mappings", "documents", "document_relationships")

	rebuildRate := float64(ops) / rebuilt.Seconds()
	logRate := float64(logCopy.Rows) / logCopy.Elapsed.Seconds()
	b.Logf("both rebuilds: %s, %.0f operations/s; COPY of the %d operation rows: %s, %.0f rows/s; COPY of the %d projection rows: %s",
		rebuilt.Round(time.Millisecond), rebuildRate, logCopy.Rows, logCopy.Elapsed.Round(time.Millisecond), logRate,
		projRows, projCopy.Round(time.Millisecond))
	b.Logf("ratio to COPY of the log's rows (rebuild ops/s over COPY rows/s): %.3f; ratio to COPY of the projection rows (COPY time over rebuild time): %.3f",
		rebuildRate/logRate, projCopy.Seconds()/rebuilt.Seconds())
	b.ReportMetric(rebuildRate, "ops/s")
	b.ReportMetric(logRate, "copy-rows/s")
	b.ReportMetric(rebuildRate/logRate, "ratio-log-copy")
	b.ReportMetric(projCopy.Seconds()/rebuilt.Seconds(), "ratio-projection-copy")
}

// buildLog appends docs documents of rebuildOpsPerDocument operations each,
// from two workloads at once (the machine's two cores), and returns their
// ids.
func buildLog(b *testing.B, env *projtest.Env, docs int) []string {
	const workers = 2
	const actionsPerJob = 50
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for wk := range workers {
		wg.Go(func() {
			w := env.NewWorkload(uint64(wk + 1))
			for i := wk; i < docs; i += workers {
				id := fmt.Sprintf("rebuild-%07d", i)
				d, _ := w.Create(id, jsondoc.DocumentType, "")
				ids[wk] = append(ids[wk], id)
				for job := 0; job < (rebuildOpsPerDocument-1)/actionsPerJob; job++ {
					actions := make([]oplog.Action, actionsPerJob)
					for k := range actions {
						actions[k] = w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]int{fmt.Sprintf("k%d", k): job})
					}
					_, err := w.Job(d, actions...)
					require.NoError(b, err)
				}
			}
		})
	}
	wg.Wait()
	var all []string
	for _, part := range ids {
		all = append(all, part...)
	}
	return all
}

// copyTables copies every row of each table into a scratch table created
// LIKE it INCLUDING ALL, in COPYs of 1,000 rows on one connection, and
// returns the rows and the time of the COPYs alone.
func copyTables(b *testing.B, pool *pgxpool.Pool, tables ...string) (int, time.Duration) {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(b, err)
	defer conn.Release()
	var rows int
	var took time.Duration
	for _, table := range tables {
		scratch := pgx.Identifier{table + "_copy"}
		_, err := pool.Exec(ctx, `CREATE TABLE `+scratch.Sanitize()+` (LIKE `+pgx.Identifier{table}.Sanitize()+` INCLUDING ALL)`)
		require.NoError(b, err)
		res, err := pool.Query(ctx, `SELECT * FROM `+pgx.Identifier{table}.Sanitize())
		require.NoError(b, err)
		var cols []string
		for _, f := range res.FieldDescriptions() {
			cols = append(cols, f.Name)
		}
		var all [][]any
		for res.Next() {
			v, err := res.Values()
			require.NoError(b, err)
			all = append(all, v)
		}
		require.NoError(b, res.Err())
		for i := 0; i < len(all); i += 1000 {
			chunk := all[i:min(i+1000, len(all))]
			t0 := time.Now()
			_, err := conn.CopyFrom(ctx, scratch, cols, pgx.CopyFromRows(chunk))
			took += time.Since(t0)
			require.NoError(b, err, "copy %s", table)
		}
		rows += len(all)
		_, err = pool.Exec(ctx, `DROP TABLE `+scratch.Sanitize())
		require.NoError(b, err)
	}
	return rows, took
}
