package analytics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/projtest"
)

// TestReconcilerHeals drops the last records of the workload: no later
// record reveals them, the reconciler finds the streams behind and heals
// them from the log, and those rows carry the log's ordinal and commit time,
// which the published records are stripped of.
func TestReconcilerHeals(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	p := newProjector(t)
	recs := env.NewWorkload(5).Random("doc", 20, 60)
	// The records carry what the log assigned, as the executor's do: without
	// it, the rows the reconciler heals are the only ones that have it.
	for _, rec := range recs {
		for i := range rec.Operations {
			op := &rec.Operations[i]
			op.Ordinal, op.TxID, op.WrittenAt = 0, 0, time.Time{}
		}
	}
	const dropped = 8
	env.Publish(recs[:len(recs)-dropped]...)
	r := env.Start(p.RunnerConfig(env.Config(p, "analytics")))
	waitCheckpoints(t, env, p.Name())
	want := logCounts(t, env)
	require.False(t, countsMatch(t, p, want), "the dropped records' operations are missing")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := r.Reconcile(ctx)
	require.NoError(t, err)
	require.Positive(t, rep.Healed)
	require.True(t, countsMatch(t, p, want))
	checkDocuments(t, env, p)

	db := p.Database()
	healed := scalar(t, p, "SELECT count() FROM "+db+".operations FINAL WHERE ordinal > 0 AND written_at_utc_ms > 0")
	require.Equal(t, uint64(rep.Healed), healed)
	// The latency query of docs/analytics.md now has rows to measure.
	latency := query(t, p, docQueries(t)[6])
	require.Equal(t, []string{toString(healed)}, latency[0][:1])
}

// TestClickHouseOutage makes every insert fail for a while (the table is
// gone): the runner keeps retrying the batch, reports the failure, loses
// nothing, and catches up once the table is back.
func TestClickHouseOutage(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	p := newProjector(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, p.Conn().Exec(ctx, "DROP TABLE "+p.Database()+"."+analytics.TableOperations))

	env.Publish(env.NewWorkload(9).Random("doc", 10, 30)...)
	r := env.Start(p.RunnerConfig(env.Config(p, "analytics")))
	env.Eventually(func() bool {
		// Readiness names the failure's class only; its text, naming the
		// table, is in Status for the log and the CLI.
		err := r.Ready()
		return err != nil && strings.Contains(err.Error(), "failing and retrying") &&
			strings.Contains(r.Status().LastError, "clickhouse table operations")
	}, catchUp, "the runner reports the failing insert")
	cps, err := env.Store.Checkpoints(ctx, p.Name())
	require.NoError(t, err)
	for _, c := range cps {
		require.Equal(t, int64(-1), c.NextOffset, "no checkpoint moves while inserts fail")
	}

	require.NoError(t, analytics.EnsureSchema(ctx, p.Conn(), p.Database(), false))
	want := logCounts(t, env)
	env.Eventually(func() bool { return countsMatch(t, p, want) }, catchUp, "clickhouse catches up once the table is back")
	waitCheckpoints(t, env, p.Name())
	checkDocuments(t, env, p)
	env.Eventually(func() bool { return r.Ready() == nil }, catchUp, "the runner is ready again")
}
