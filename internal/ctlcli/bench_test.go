package ctlcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin/bench"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/log/postgres"
)

// TestBenchEmbedded runs short benchmarks against the real Postgres and
// Kafka, embedded, and checks the report's structure and consistency — not
// its speed, which a few seconds on a shared machine cannot tell.
func TestBenchEmbedded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		// fixed is what a fixed workload submits exactly (zero: timed).
		fixed    bench.Count
		workload string
		fills    int // W2's fill jobs per document
	}{
		// Only one run may profile: the CPU profile is the process's.
		{"single via http, closed loop", []string{"--mode", "single", "--via", "http", "--duration", "3s", "--cpu-profile", "PROFILE"}, bench.Count{}, "for 3s", 0},
		{"batch via kafka, open loop", []string{"--mode", "batch", "--via", "kafka", "--duration", "3s", "--rate", "30"}, bench.Count{}, "for 3s", 0},
		// 4 documents × 2 rounds × 3 actions, one action per job.
		{"single via kafka, two rounds", []string{"--mode", "single", "--via", "kafka", "--rounds", "2"}, bench.Count{Jobs: 24, Operations: 24}, "2 round(s) per document, 24 operations", 0},
		// 15 operations in jobs of 3: document 0 gets two jobs, the others one.
		{"batch via http, 15 operations", []string{"--mode", "batch", "--via", "http", "--operations", "15"}, bench.Count{Jobs: 5, Operations: 15}, "15 operations", 0},
		// Through the batch endpoint: groups of 3 and 1 documents, each
		// request one job of every document of its group.
		{"single via http, batches of 3, two rounds", []string{"--mode", "single", "--via", "http", "--rounds", "2", "--jobs-per-request", "3"}, bench.Count{Jobs: 24, Operations: 24}, "2 round(s) per document, 24 operations", 0},
		// Open loop: a request takes what fell due, up to 2 jobs.
		{"single via http, open loop, batches of 2", []string{"--mode", "single", "--via", "http", "--operations", "20", "--rate", "40", "--jobs-per-request", "2"}, bench.Count{Jobs: 20, Operations: 20}, "20 operations", 0},
		// Through the client's batcher: each document one job at a time,
		// the four documents' jobs sharing requests.
		{"single via http, coalesced, two rounds", []string{"--mode", "single", "--via", "http", "--rounds", "2", "--coalesce", "3"}, bench.Count{Jobs: 24, Operations: 24}, "2 round(s) per document, 24 operations", 0},
		// Sampled at the view's notified commits: with an interval of an
		// hour, the run drains only if those samples come.
		{"single via kafka, two rounds, sampled at commits", []string{"--mode", "single", "--via", "kafka", "--rounds", "2", "--sample-interval", "1h"}, bench.Count{Jobs: 24, Operations: 24}, "2 round(s) per document, 24 operations", 0},
		// The executor announcing without waiting: every job still drains.
		{"batch via http, two rounds, async announce", []string{"--mode", "batch", "--via", "http", "--rounds", "2", "--async-announce"}, bench.Count{Jobs: 8, Operations: 24}, "2 round(s) per document, 24 operations", 0},
		// W2: each document's state is filled to 8 KB (one fill job) first.
		{"W2 single via kafka", []string{"--mode", "single", "--via", "kafka", "--duration", "3s", "--state-size", "8KB"}, bench.Count{}, "for 3s", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			profile := filepath.Join(t.TempDir(), "cpu.pprof")
			for i, f := range tc.flags {
				if f == "PROFILE" {
					tc.flags[i] = profile
				}
			}
			url := migrated(t)
			// Another doclog's projector position in the same schema,
			// which the embedded run must leave alone.
			store, err := postgres.Open(t.Context(), url)
			require.NoError(t, err)
			defer store.Close()
			db := store.Pool()
			_, err = db.Exec(t.Context(), `INSERT INTO projector_checkpoints (projector, partition, next_offset, epoch) VALUES ('docview', 0, 42, 7)`)
			require.NoError(t, err)
			kenv := testenv.Kafka(t)
			args := append([]string{"bench", "--embedded", "--baseline", "-o", "json",
				"--database-url", url, "--kafka-seeds", strings.Join(kenv.Config.Seeds, ","), "--topics-prefix", kenv.Topics.Prefix,
				"--documents", "4", "--actions", "3", "--drain", "40s", "--partitions", "2"}, tc.flags...)
			code, out, errOut := ctl(t, args...)
			require.Equal(t, exitOK, code, errOut)
			var rep bench.Report
			require.NoError(t, json.Unmarshal([]byte(out), &rep), out)

			require.True(t, rep.Embedded)
			// The run worked in a schema of its own, and dropped it: the
			// database's schema has neither its operations nor its
			// positions.
			require.True(t, strings.HasPrefix(rep.Schema, "doclog_bench_"), rep.Schema)
			var left bool
			require.NoError(t, db.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, rep.Schema).Scan(&left))
			require.False(t, left, "schema %s left behind", rep.Schema)
			var ops, checkpoints int
			require.NoError(t, db.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM projector_checkpoints)`).Scan(&ops, &checkpoints))
			require.Zero(t, ops)
			require.Equal(t, 1, checkpoints)
			var next, epoch int64
			require.NoError(t, db.QueryRow(t.Context(), `SELECT next_offset, epoch FROM projector_checkpoints WHERE projector = 'docview' AND partition = 0`).Scan(&next, &epoch))
			require.Equal(t, []int64{42, 7}, []int64{next, epoch})
			require.Equal(t, tc.flags[1], rep.Mode)
			require.Equal(t, tc.flags[3], rep.Via)
			require.Positive(t, rep.Submitted.Jobs)
			require.Equal(t, tc.workload, rep.Workload)
			require.Equal(t, slices.Contains(tc.flags, "--async-announce"), rep.AsyncAnnounce)
			if i := slices.Index(tc.flags, "--coalesce"); i >= 0 {
				require.Equal(t, tc.flags[i+1], strconv.Itoa(rep.Coalesce))
			}
			if tc.fixed.Jobs > 0 {
				require.Equal(t, tc.fixed, rep.Submitted, "a fixed workload submits exactly its jobs")
				require.Zero(t, rep.DurationSeconds)
			}
			require.Zero(t, rep.SubmitFailures, rep.LastSubmitErr)
			require.Zero(t, rep.Failed)
			require.True(t, rep.Drained)
			// Every submitted job reached WRITE_READY by the end of the drain,
			// and READ_READY never counts more than WRITE_READY.
			require.Equal(t, rep.Submitted, rep.WriteReady.Count)
			require.LessOrEqual(t, rep.ReadReady.Jobs, rep.WriteReady.Jobs)
			for _, st := range []bench.Stage{rep.WriteReady, rep.ReadReady} {
				require.Positive(t, st.OpsPerSec)
				require.Positive(t, st.JobsPerSec)
				require.LessOrEqual(t, st.LatencyP50Ms, st.LatencyP95Ms)
				require.LessOrEqual(t, st.LatencyP95Ms, st.LatencyP99Ms)
				require.LessOrEqual(t, st.LatencyP99Ms, st.LatencyMaxMs)
			}
			if rep.Mode == bench.ModeBatch {
				require.Equal(t, rep.Submitted.Jobs*3, rep.Submitted.Operations)
			} else {
				require.Equal(t, rep.Submitted.Jobs, rep.Submitted.Operations)
			}
			if slices.Contains(tc.flags, "--rate") {
				require.Equal(t, "open", rep.Loop)
			} else {
				require.Equal(t, "closed", rep.Loop)
			}
			// Every READ_READY job's records were read back, and its legs
			// split its latency: they are never negative (the clocks are
			// this host's; record timestamps are whole milliseconds, so a
			// leg may read up to 1 ms short).
			require.Empty(t, rep.LegsError)
			require.Len(t, rep.Legs, 4)
			for _, l := range rep.Legs {
				require.Equal(t, rep.ReadReady.Jobs, l.Jobs, l.Name)
				require.GreaterOrEqual(t, l.P50Ms, -1.0, l.Name)
				require.LessOrEqual(t, l.P50Ms, l.P95Ms, l.Name)
				require.LessOrEqual(t, l.P95Ms, l.P99Ms, l.Name)
				require.LessOrEqual(t, l.P99Ms, l.MaxMs, l.Name)
				require.LessOrEqual(t, l.MaxMs, rep.ReadReady.LatencyMaxMs+1, l.Name)
			}
			require.NotNil(t, rep.Baseline)
			// The COPY carries the run's operations, the documents'
			// creations and W2's fills.
			require.Equal(t, rep.Submitted.Operations+4+4*tc.fills, rep.Baseline.Rows)
			if tc.fills > 0 {
				require.Equal(t, 8<<10, rep.StateBytes)
			}
			require.Positive(t, rep.Baseline.RowsPerSec)
			require.Positive(t, rep.Baseline.RatioWriteReady)
			require.Positive(t, rep.Baseline.RatioReadReady)
			require.Positive(t, rep.Postgres.Transactions)
			require.Positive(t, rep.Postgres.TuplesInserted)
			require.NotEmpty(t, rep.PeakRSS)
			require.Positive(t, rep.PeakRSS[0].PeakBytes)
			// The test's Postgres and broker run on this host: the CPU of
			// the run's three processes is accounted, and adds up.
			require.NotNil(t, rep.CPU)
			var names []string
			var sum float64
			for _, p := range rep.CPU.Processes {
				names = append(names, p.Name)
				sum += p.Seconds
				require.NotEmpty(t, p.PIDs, p.Name)
			}
			require.Equal(t, []string{"doclogctl bench --embedded (every role and the load generator)",
				"postgres (all processes of the cluster)", "kafka broker"}, names)
			require.Positive(t, rep.CPU.Processes[0].Seconds)
			require.InDelta(t, sum, rep.CPU.Seconds, 1e-9)
			require.InDelta(t, rep.CPU.Seconds*1e6/float64(rep.Submitted.Operations), rep.CPU.MicrosPerOp, 1e-6)
			if slices.Contains(tc.flags, profile) {
				fi, err := os.Stat(profile)
				require.NoError(t, err)
				require.Positive(t, fi.Size())
			}
		})
	}
}

func TestBenchUsage(t *testing.T) {
	t.Setenv("DOCLOG_DATABASE_URL", "")
	t.Setenv("DATABASE_URL", "")
	code, _, errOut := ctl(t, "bench", "--embedded")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "no database")

	code, _, errOut = ctl(t, "bench", "--mode", "both", "--via", "carrier-pigeon", "--database-url", "postgres://x")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "the mode must be single or batch")
	require.Contains(t, errOut, "jobs go via http or kafka")

	code, _, errOut = ctl(t, "bench", "--database-url", "postgres://x")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "no ingest URL")

	code, _, errOut = ctl(t, "bench", "--database-url", "postgres://x", "--ingest-url", "http://x", "--no-backpressure")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "no backpressure applies to an embedded run")
	code, _, errOut = ctl(t, "bench", "--database-url", "postgres://x", "--ingest-url", "http://x", "--async-announce")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "async announce applies to an embedded run")

	code, _, errOut = ctl(t, "bench", "--embedded", "--database-url", "postgres://x", "--kafka-seeds", "k:9092", "--rounds", "1", "--duration", "10s")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "exclude each other")

	code, _, errOut = ctl(t, "bench", "--embedded", "--database-url", "postgres://x", "--kafka-seeds", "k:9092", "--mode", "batch", "--operations", "70")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "a multiple of the actions per job (50)")

	code, _, errOut = ctl(t, "bench", "--embedded", "--database-url", "postgres://x", "--state-size", "large")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--state-size must be a size such as 1KB")
	code, _, errOut = ctl(t, "bench", "--embedded", "--database-url", "postgres://x", "--state-size", "1GB")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--state-size must be a size such as 1KB")
	code, _, errOut = ctl(t, "bench", "--embedded", "--database-url", "postgres://x", "--kafka-seeds", "localhost:1", "--state-size", "64MB")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "the state size must be 0 to")
}
