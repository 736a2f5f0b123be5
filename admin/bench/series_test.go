package bench

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/kafka"
)

func TestSettle(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	s := newSampler(2)
	// Document 0's view reached index 1 at t0+100ms and index 3 at
	// t0+900ms; document 1's reached index 0 at t0+50ms.
	at := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	s.timeline[0] = []sample{{at(100 * time.Millisecond), 1}, {at(900 * time.Millisecond), 3}}
	s.timeline[1] = []sample{{at(50 * time.Millisecond), 0}}
	pending := []pendingJob{
		{id: "a", doc: 0, ops: 1, due: t0, known: true, index: 1},                            // ready at +100ms
		{id: "b", doc: 0, ops: 2, due: t0.Add(10 * time.Millisecond), known: true, index: 2}, // ready at +900ms
		{id: "c", doc: 0, ops: 1, due: t0, known: true, index: 4},                            // not shown yet
		{id: "d", doc: 1, ops: 1, due: t0, known: false},                                     // result unknown
		{id: "e", doc: 1, ops: 5, due: t0, known: true, index: math.MaxInt64},                // failed
		{id: "f", doc: 1, ops: 1, due: t0, known: true, index: -1},                           // no index: the first sample
	}
	left, lat, ops := settle(append([]pendingJob(nil), pending...), t0.Add(500*time.Millisecond), s.reached)
	require.Equal(t, []time.Duration{100 * time.Millisecond, 50 * time.Millisecond}, lat)
	require.Equal(t, 2, ops, "a and f, one operation each")
	require.Equal(t, []string{"b", "c", "d"}, ids(left), "b was shown after the tick, so in the next interval")

	left, lat, ops = settle(left, t0.Add(time.Second), s.reached)
	require.Equal(t, []time.Duration{890 * time.Millisecond}, lat, "from when b was due")
	require.Equal(t, 2, ops)
	require.Equal(t, []string{"c", "d"}, ids(left))
}

func ids(js []pendingJob) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.id)
	}
	return out
}

func TestGroupLag(t *testing.T) {
	t.Parallel()
	g := seriesGroups{executor: "p.exec", projectors: []string{"p.docview", "p.indexer"}}
	lags := []kafka.PartitionLag{
		{Group: "p.exec", Partition: 0, Lag: 3, LagSeconds: 0.2},
		{Group: "p.exec", Partition: 1, Lag: 4, LagSeconds: 0.5},
		{Group: "p.docview", Partition: 0, Lag: 10, LagSeconds: 1},
		{Group: "p.indexer", Partition: 0, Lag: 7, LagSeconds: 2},
		{Group: "p.indexer", Partition: 1, Lag: 5, LagSeconds: 0},
		{Group: "other", Partition: 0, Lag: 1000},
	}
	exec, execSec, proj, projSec := groupLag(lags, g)
	require.Equal(t, []float64{7, 0.5, 12, 2}, []float64{exec, execSec, proj, projSec},
		"the executor's summed over partitions; the projector furthest behind in records (indexer, 12)")

	exec, _, proj, _ = groupLag(lags[2:3], g)
	require.True(t, math.IsNaN(exec), "an executor group with no offsets is unknown, not zero")
	require.Equal(t, 10.0, proj)
}

func TestProcessUsage(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	groups := []cpuGroup{{name: "a"}, {name: "gone"}}
	before := map[string]procTotals{"a": {at: t0, cpuTicks: 1000, rss: 10 << 20}, "gone": {at: t0, cpuTicks: 5, rss: 1}}
	after := map[string]procTotals{"a": {at: t0.Add(2 * time.Second), cpuTicks: 1300, rss: 12 << 20}, "gone": {at: t0.Add(2 * time.Second), rss: -1}}
	u := processUsage(groups, before, after)
	require.Equal(t, "a", u[0].Name)
	require.Equal(t, int64(12<<20), u[0].RSSBytes)
	require.InDelta(t, 1.5, u[0].CPUCores, 1e-9, "300 ticks of 10ms over 2s")
	require.Equal(t, int64(-1), u[1].RSSBytes)
	require.True(t, math.IsNaN(u[1].CPUCores))

	// This process, sampled for real: it has memory, and its CPU time does
	// not run backwards.
	self := seriesProcessGroups([]SeriesProcess{{Name: "self", PID: os.Getpid()}}, nil)
	require.Equal(t, os.Getpid(), self[0].pids[0])
	s1 := sampleProcesses(self)
	for x := 0; x < 2e7; x++ {
		_ = x * x
	}
	s2 := sampleProcesses(self)
	u = processUsage(self, s1, s2)
	require.Greater(t, u[0].RSSBytes, int64(1<<20))
	require.GreaterOrEqual(t, u[0].CPUCores, 0.0)
	require.Equal(t, int64(-1), sampleProcesses([]cpuGroup{{name: "none", pids: []int{1 << 30}}})["none"].rss)
}

func TestColumnNames(t *testing.T) {
	t.Parallel()
	run := []cpuGroup{{name: "doclogctl bench (load generator)"}, {name: "doclog serve --roles=executor"},
		{name: "doclog serve --roles=ingest,projectors"}, {name: "postgres (all processes of the cluster)", reaps: true},
		{name: "kafka broker"}, {name: "kafka broker"}, {name: "doclogctl bench --embedded (every role and the load generator)"}}
	var names []string
	for _, g := range seriesProcessGroups(nil, run) {
		names = append(names, g.name)
	}
	require.Equal(t, []string{"bench", "executor", "ingest+projectors", "postgres", "kafka", "kafka_2", "embedded"}, names)
}

func TestSeriesCSV(t *testing.T) {
	t.Parallel()
	procs := []cpuGroup{{name: "executor", pids: []int{1}}}
	row := SeriesRow{Elapsed: 10 * time.Second, Interval: 10 * time.Second, SubmittedOpsPerSec: 100, ReadReadyOpsPerSec: 99.5,
		P50Ms: math.NaN(), P99Ms: 12.34, ExecutorLag: 3, ExecutorLagSeconds: 0.25, ProjectorLag: math.NaN(), ProjectorLagSeconds: math.NaN(),
		Processes: []ProcessUsage{{Name: "executor", RSSBytes: 50 << 20, CPUCores: 0.5}}}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	require.NoError(t, w.Write(seriesHeader(procs)))
	require.NoError(t, w.Write(row.csv()))
	w.Flush()
	require.Equal(t, "elapsed_s,interval_s,submitted_ops_per_s,read_ready_ops_per_s,read_ready_p50_ms,read_ready_p99_ms,"+
		"executor_lag_records,executor_lag_s,projector_lag_records,projector_lag_s,rss_mib_executor,cpu_cores_executor\n"+
		"10.0,10.000,100.0,99.5,,12.3,3,0.250,,,50.0,0.500\n", buf.String())
}

func TestSeriesConfig(t *testing.T) {
	t.Parallel()
	c := Config{DatabaseURL: "postgres://x", Embedded: true, Kafka: kafka.Config{Seeds: []string{"k:9092"}}}.WithDefaults()
	require.Equal(t, DefaultSeriesInterval, c.SeriesInterval)
	c.SeriesInterval = -time.Second
	require.ErrorContains(t, c.Validate(), "series interval")
}
