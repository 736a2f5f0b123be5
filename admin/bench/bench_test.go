package bench

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin/bench/pgprobe"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
)

// The end-to-end run against the real stack is TestBenchEmbedded in
// cmd/doclogctl; these cover the arithmetic it reports.

func TestPercentile(t *testing.T) {
	t.Parallel()
	var lat []time.Duration
	for i := 1; i <= 200; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 100*time.Millisecond, percentile(lat, 50))
	require.Equal(t, 190*time.Millisecond, percentile(lat, 95))
	require.Equal(t, 198*time.Millisecond, percentile(lat, 99))
	require.Equal(t, 7*time.Millisecond, percentile([]time.Duration{7 * time.Millisecond}, 99))
	require.Zero(t, percentile(nil, 50))

	var s Stage
	s.Jobs, s.Operations = 200, 400
	start := time.Now()
	s.finish(start, start.Add(2*time.Second), lat, "test")
	require.InDelta(t, 100, s.JobsPerSec, 1e-9)
	require.InDelta(t, 200, s.OpsPerSec, 1e-9)
	require.Equal(t, []float64{100, 190, 198, 200}, []float64{s.LatencyP50Ms, s.LatencyP95Ms, s.LatencyP99Ms, s.LatencyMaxMs})
}

func TestSamplerReached(t *testing.T) {
	t.Parallel()
	s := newSampler(2)
	t0 := time.Now()
	at := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	s.timeline[0] = []sample{{at(0), 2}, {at(time.Second), 5}, {at(2 * time.Second), 9}}
	for _, tc := range []struct {
		index int64
		at    time.Time
		ok    bool
	}{{0, t0, true}, {2, t0, true}, {3, t0.Add(time.Second), true}, {9, t0.Add(2 * time.Second), true}, {10, time.Time{}, false}} {
		got, ok := s.reached(0, tc.index)
		require.Equal(t, tc.ok, ok, tc.index)
		if ok {
			require.True(t, tc.at.Equal(got), "index %d: reached at %v, want %v", tc.index, got, tc.at)
		}
	}
	_, ok := s.reached(1, 0)
	require.False(t, ok, "a stream never sampled has reached nothing")
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	require.Equal(t, 250*time.Millisecond, retryAfter(h("Retry-After", "1", "Retry-After-Ms", "250")))
	require.Equal(t, 3*time.Second, retryAfter(h("Retry-After", "3", "Retry-After-Ms", "0")))
	require.Equal(t, 2*time.Second, retryAfter(h("Retry-After", "2")))
	require.Equal(t, time.Second, retryAfter(h()))
}

func TestJob(t *testing.T) {
	t.Parallel()
	at := time.Now()
	j, err := newJob("0190a5f1-7c2e-7a3b-8c4d-5e6f7a8b9c0d", 3, 50, at)
	require.NoError(t, err)
	require.Equal(t, "0190a5f1-7c2e-7a3b-8c4d-5e6f7a8b9c0d", j.id.String())
	require.Equal(t, []int32{3, 50}, []int32{j.doc, j.ops})
	require.True(t, at.Equal(j.submittedAt()))
	require.Equal(t, jobPending, j.state)
	require.EqualValues(t, -1, j.index, "no token index until the result is read")
	// Millions of these are held for the report: keep them small.
	require.LessOrEqual(t, unsafe.Sizeof(j), uintptr(56))

	stream := oplog.StreamKey{DocumentID: "d", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	j.known(oplog.JobResult{Status: oplog.JobFailed, CreatedAt: at.Add(time.Second)}, stream)
	require.Equal(t, jobFailed, j.state)
	require.True(t, at.Add(time.Second).Equal(j.writeReadyAt()))

	_, err = newJob("job-7", 0, 1, at)
	require.ErrorContains(t, err, `job id "job-7" is not a UUID`)
}

func TestConfig(t *testing.T) {
	t.Parallel()
	c := Config{DatabaseURL: "postgres://x", Embedded: true, Kafka: kafka.Config{Seeds: []string{"k:9092"}}}.WithDefaults()
	require.NoError(t, c.Validate())
	require.Equal(t, ModeSingle, c.Mode)
	require.Equal(t, ViaHTTP, c.Via)
	require.Equal(t, DefaultDocuments, c.Documents)
	require.Equal(t, DefaultDuration, c.Duration)
	require.Equal(t, 1, c.opsPerJob())

	c.Mode, c.ActionsPerDocument = ModeBatch, 101
	require.ErrorContains(t, c.Validate(), "1 to 100")
	c.ActionsPerDocument = 7
	require.Equal(t, 7, c.opsPerJob())

	fixed := Config{DatabaseURL: "postgres://x", Embedded: true, Kafka: kafka.Config{Seeds: []string{"k:9092"}}, Rounds: 1}.WithDefaults()
	require.NoError(t, fixed.Validate())
	require.Zero(t, fixed.Duration, "a fixed workload has no default duration")
	require.Equal(t, 10000, fixed.fixedJobs(), "W1 at one round: 200 documents × 50 single-action jobs")
	require.Equal(t, 50, fixed.jobsOf(199))
	fixed.Mode = ModeBatch
	require.Equal(t, 200, fixed.fixedJobs())
	require.Equal(t, 1, fixed.jobsOf(0))
	fixed.Rounds, fixed.Operations = 0, 10050
	require.NoError(t, fixed.Validate())
	require.Equal(t, 201, fixed.fixedJobs())
	require.Equal(t, []int{2, 1}, []int{fixed.jobsOf(0), fixed.jobsOf(1)}, "job 200 goes to document 0")
	fixed.Operations = 10001
	require.ErrorContains(t, fixed.Validate(), "a multiple of the actions per job")
	fixed.Rounds, fixed.Operations = 1, 50
	require.ErrorContains(t, fixed.Validate(), "not both")
	fixed.Operations, fixed.Duration = 0, time.Second
	require.ErrorContains(t, fixed.Validate(), "exclude each other")
	require.Equal(t, -1, c.jobsOf(0), "a timed run has no share")

	co := Config{DatabaseURL: "postgres://x", Embedded: true, Kafka: kafka.Config{Seeds: []string{"k:9092"}}, Coalesce: 50}.WithDefaults()
	require.NoError(t, co.Validate())
	co.Via = ViaKafka
	require.ErrorContains(t, co.Validate(), "coalescing submits through the ingest API's batch endpoint")
	co.Via, co.JobsPerRequest = ViaHTTP, 5
	require.ErrorContains(t, co.Validate(), "coalescing and jobs per request above 1 exclude each other")
	co.JobsPerRequest, co.Coalesce = 1, 1001
	require.ErrorContains(t, co.Validate(), "must be 0 to 1000")

	r := &runner{cfg: c}
	require.Len(t, r.inputs(3), 7)
	r.cfg.Mode = ModeSingle
	in := r.inputs(10)
	require.Len(t, in, 1)
	require.JSONEq(t, `{"k3":1}`, string(in[0]), "job 10 of a 7-key round patches key 3 in round 1")
	require.True(t, json.Valid(in[0]))
}

func TestPostgresReport(t *testing.T) {
	t.Parallel()
	before := pgprobe.Activity{XactCommit: 100, Statements: -1}
	after := pgprobe.Activity{XactCommit: 160, XactRollback: 2, TupInserted: 300, TupUpdated: 100, Statements: -1}
	p := postgresReport(after.Sub(before), 12, 100)
	require.Equal(t, int64(50), p.Transactions, "62 transactions, 12 of them the benchmark's probes")
	require.InDelta(t, 0.5, p.TransactionsPerOp, 1e-9)
	require.InDelta(t, 4, p.TuplesWrittenPerOp, 1e-9)
	require.Nil(t, p.Statements, "without pg_stat_statements the statements are unknown")

	before.Statements, after.Statements = 1000, 1412
	p = postgresReport(after.Sub(before), 12, 100)
	require.NotNil(t, p.StatementsPerOp)
	require.InDelta(t, 4, *p.StatementsPerOp, 1e-9)
}

func TestWithPoolSize(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://h/db?pool_max_conns=20&sslmode=disable", withPoolSize("postgres://h/db?sslmode=disable", 20))
	require.Equal(t, "postgres://h/db?pool_max_conns=3", withPoolSize("postgres://h/db?pool_max_conns=3", 20))
	require.Equal(t, "host=h dbname=db", withPoolSize("host=h dbname=db", 20))
}

func TestNewLeg(t *testing.T) {
	t.Parallel()
	lat := make([]time.Duration, 0, 100)
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	l := newLeg("x", "span", lat)
	require.Equal(t, Leg{Name: "x", Span: "span", Jobs: 100, MeanMs: 50.5, P50Ms: 50, P95Ms: 95, P99Ms: 99, MaxMs: 100}, l)
	require.Equal(t, Leg{Name: "y", Span: "none"}, newLeg("y", "none", nil))
}

func TestWithSearchPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://h/db?sslmode=disable":          "postgres://h/db?search_path=doclog_bench_1&sslmode=disable",
		"postgres://h/db?search_path=app%2Cpublic": "postgres://h/db?search_path=doclog_bench_1",
		"host=h dbname=db":                         "host=h dbname=db search_path=doclog_bench_1",
	} {
		got, err := withSearchPath(in, "doclog_bench_1")
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	// A keyword/value string that sets its own search path cannot be
	// rewritten safely: refused, with the way out.
	_, err := withSearchPath("host=h search_path=app", "doclog_bench_1")
	require.ErrorContains(t, err, "postgres:// URL")
}

func TestPeakRSS(t *testing.T) {
	t.Parallel()
	rss := embeddedRSS()
	require.Len(t, rss, 1)
	require.Positive(t, rss[0].PeakBytes)
	_, ok := vmHWM("no-such-process")
	require.False(t, ok)
}

func TestProcessLabel(t *testing.T) {
	t.Parallel()
	require.Equal(t, "doclog serve --roles=executor", processLabel([]string{"/usr/bin/doclog", "serve", "--roles=executor", "--log-level", "warn"}))
	require.Equal(t, "doclog serve --roles=ingest,projectors", processLabel([]string{"doclog", "serve", "--roles", "ingest,projectors"}))
	require.Equal(t, "doclog dev", processLabel([]string{"doclog", "dev"}))
	require.Equal(t, "doclog", processLabel([]string{"doclog"}))
}

func TestCPUAccounting(t *testing.T) {
	t.Parallel()
	// This process's own CPU times parse, and grow with work.
	self := []cpuGroup{{name: "self", pids: []int{os.Getpid()}}}
	// On a loaded machine a short busy loop may not register a clock tick
	// (10 ms), so it spins until one does, within a bound.
	before := snapshotCPU(self)
	after := before
	for deadline := time.Now().Add(10 * time.Second); after["self"] <= before["self"] && time.Now().Before(deadline); {
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
		}
		after = snapshotCPU(self)
	}
	require.Greater(t, after["self"], before["self"])
	rep := cpuReport(self, cpuSnapshot{"self": 10}, cpuSnapshot{"self": 60}, 2, 1000)
	require.InDelta(t, 0.5, rep.Seconds, 1e-9)
	require.InDelta(t, 500, rep.MicrosPerOp, 1e-9)
	require.InDelta(t, 500, rep.Processes[0].MicrosPerOp, 1e-9)

	// A seed on this host is found by its listening port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	groups := cpuGroups("self", true, "no-such-prefix.", 0, []string{ln.Addr().String(), "192.0.2.1:9092"})
	require.Len(t, groups, 2)
	require.Equal(t, "kafka broker", groups[1].name)
	require.Equal(t, []int{os.Getpid()}, groups[1].pids)
}
