package analytics_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
)

// BenchmarkApply measures one runner batch of 10 000 operations over 1 000
// documents, one insert into each table, against the test server.
func BenchmarkApply(b *testing.B) {
	reg := prometheus.NewRegistry()
	p := newProjector(b, func(c *analytics.Config) { c.Registerer = reg })
	w := newWriter(b)
	var changes []projectors.Change
	for d := range 1000 {
		id := fmt.Sprintf("doc-%04d", d)
		cs := []projectors.Change{w.create(id, "")}
		for i := range 9 {
			cs = append(cs, w.patch(id, oplog.ScopeGlobal, i))
		}
		changes = append(changes, merge(cs...)...)
	}
	tx := &fakeTx{heads: map[oplog.StreamKey]projectors.Head{}}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		require.NoError(b, p.Apply(ctx, tx, changes))
	}
	b.ReportMetric(float64(b.N*10_000)/b.Elapsed().Seconds(), "rows/s")
	secs := gathered(b, reg, "doclog_analytics_insert_seconds")
	for _, table := range []string{analytics.TableOperations, analytics.TableDocuments} {
		b.ReportMetric(1000*secs[table+" sum"]/secs[table+" count"], table+"-ms/insert")
	}
}
