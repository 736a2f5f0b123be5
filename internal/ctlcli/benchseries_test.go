package ctlcli

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin/bench"
	"github.com/doclog/doclog/internal/testenv"
)

// TestBenchSeries runs a short embedded open-loop benchmark with a 1 s
// series against the real Postgres and Kafka and checks the CSV: a row per
// interval with every column, and figures consistent with the report.
func TestBenchSeries(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	kenv := testenv.Kafka(t)
	file := filepath.Join(t.TempDir(), "series.csv")
	code, out, errOut := ctl(t, "bench", "--embedded", "-o", "json",
		"--database-url", url, "--kafka-seeds", strings.Join(kenv.Config.Seeds, ","), "--topics-prefix", kenv.Topics.Prefix,
		"--documents", "4", "--actions", "3", "--duration", "6s", "--drain", "40s", "--partitions", "2",
		"--rate", "40", "--series", file, "--series-interval", "1s")
	require.Equal(t, exitOK, code, errOut)
	var rep bench.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)

	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"elapsed_s", "interval_s", "submitted_ops_per_s", "read_ready_ops_per_s",
		"read_ready_p50_ms", "read_ready_p99_ms", "executor_lag_records", "executor_lag_s",
		"projector_lag_records", "projector_lag_s", "rss_mib_embedded", "cpu_cores_embedded"}, rows[0][:12])
	// Then the Postgres cluster's and the local broker's, as the report's
	// CPU finds them: a pair of columns each.
	require.Contains(t, rows[0], "rss_mib_postgres")
	require.Contains(t, rows[0], "cpu_cores_kafka")
	require.Zero(t, (len(rows[0])-10)%2)
	// Six intervals of 1 s in 6 s of submission; the last may be cut short
	// by the end of the load, and is then not written.
	require.GreaterOrEqual(t, len(rows)-1, 5)
	require.LessOrEqual(t, len(rows)-1, 6)

	col := func(row []string, name string) float64 {
		t.Helper()
		for i, h := range rows[0] {
			if h == name {
				if row[i] == "" {
					return math.NaN()
				}
				v, err := strconv.ParseFloat(row[i], 64)
				require.NoError(t, err, name)
				return v
			}
		}
		t.Fatalf("no column %s", name)
		return 0
	}
	var submitted, ready float64
	var withLatency, withLag int
	for i, row := range rows[1:] {
		require.Len(t, row, len(rows[0]))
		require.InDelta(t, float64(i+1), col(row, "elapsed_s"), 0.5, "a row per second")
		iv := col(row, "interval_s")
		submitted += col(row, "submitted_ops_per_s") * iv
		ready += col(row, "read_ready_ops_per_s") * iv
		if p99 := col(row, "read_ready_p99_ms"); !math.IsNaN(p99) {
			withLatency++
			require.Positive(t, p99)
			require.LessOrEqual(t, col(row, "read_ready_p50_ms"), p99)
		}
		if lag := col(row, "executor_lag_records"); !math.IsNaN(lag) {
			withLag++
			require.GreaterOrEqual(t, lag, 0.0)
		}
		require.Greater(t, col(row, "rss_mib_embedded"), 10.0, "the roles and the load generator hold more than 10 MiB")
		require.GreaterOrEqual(t, col(row, "cpu_cores_embedded"), 0.0)
		require.Greater(t, col(row, "rss_mib_postgres"), 1.0)
	}
	// Submitted counts acknowledged operations, READ_READY those the view
	// showed, each in its interval: the rows add up to no more than the
	// report's totals, and to most of them (the last partial interval and
	// the drain are not rows).
	// The rates are printed to 0.1 operations/s and the intervals to the
	// millisecond, so each row's count is known to ±0.1 (intervals of about
	// a second): the sums are compared within that.
	slack := 0.1 * float64(len(rows)-1)
	require.LessOrEqual(t, submitted, float64(rep.Submitted.Operations)+slack)
	require.GreaterOrEqual(t, submitted, 0.5*float64(rep.Submitted.Operations))
	require.LessOrEqual(t, ready, submitted+slack)
	require.Positive(t, ready)
	require.GreaterOrEqual(t, withLatency, 3, "most intervals have jobs reaching READ_READY")
	require.GreaterOrEqual(t, withLag, 3, "the executor group's lag is read once it has committed")
}
