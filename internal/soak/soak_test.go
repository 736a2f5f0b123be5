package soak

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// series builds a CSV of n rows 10 s apart with the given columns, each a
// function of the row.
func series(t *testing.T, n int, cols map[string]func(i int) float64) *Series {
	t.Helper()
	names := []string{"elapsed_s", "submitted_ops_per_s", "read_ready_p99_ms", "executor_lag_records",
		"projector_lag_records", "rss_mib_executor", "rss_mib_bench", "cpu_cores_executor"}
	var b strings.Builder
	b.WriteString(strings.Join(names, ",") + "\n")
	for i := range n {
		row := make([]string, len(names))
		for j, name := range names {
			switch f, ok := cols[name]; {
			case name == "elapsed_s":
				row[j] = fmt.Sprint(float64(i+1) * 10)
			case ok:
				if v := f(i); !math.IsNaN(v) {
					row[j] = fmt.Sprint(v)
				}
			default:
				row[j] = "1"
			}
		}
		b.WriteString(strings.Join(row, ",") + "\n")
	}
	s, err := Read(strings.NewReader(b.String()))
	require.NoError(t, err)
	require.Equal(t, n, s.Len())
	return s
}

func check(t *testing.T, v Verdict, col string) Check {
	t.Helper()
	for _, c := range v.Checks {
		if c.Column == col {
			return c
		}
	}
	t.Fatalf("no check of %s", col)
	return Check{}
}

func TestJudgeFlat(t *testing.T) {
	t.Parallel()
	// Noise of ±5% around flat means, and a warm-up that climbs: flat.
	s := series(t, 60, map[string]func(int) float64{
		"submitted_ops_per_s":   func(int) float64 { return 1000 },
		"read_ready_p99_ms":     func(i int) float64 { return 80 * (1 + 0.05*float64(i%3-1)) },
		"executor_lag_records":  func(i int) float64 { return 500 + float64(i%2)*40 },
		"projector_lag_records": func(i int) float64 { return 3 + float64(i%5) },
		"rss_mib_executor": func(i int) float64 {
			if i < 6 {
				return 40 + float64(i)*10 // warm-up: left out
			}
			return 120 + float64(i%4)
		},
		"rss_mib_bench": func(i int) float64 { return float64(100 + 10*i) }, // grows by design: not judged
	})
	v := Judge(s, Options{Warmup: time.Minute})
	require.True(t, v.OK, "%+v", v)
	require.Equal(t, 54, v.Rows)
	require.InDelta(t, 530, v.Seconds, 1e-9)
	require.Equal(t, 123.0, v.ExecutorRSSMaxMiB)
	require.True(t, v.ExecutorRSSOK)
	c := check(t, v, "projector_lag_records")
	require.True(t, c.Flat, "a lag of a few records varies by more than 10%% but within a second's load (floor %g)", c.Floor)
	require.InDelta(t, 1000, c.Floor, 1e-9)
	bench := check(t, v, "rss_mib_bench")
	require.False(t, bench.Judged)
	require.False(t, bench.Flat)
	require.Greater(t, bench.Trend, 0.5)
	require.False(t, check(t, v, "cpu_cores_executor").Judged)
}

func TestJudgeGrowth(t *testing.T) {
	t.Parallel()
	// The executor's memory grows 0.5 MiB a row: +30% from the first
	// third's mean to the last's.
	s := series(t, 60, map[string]func(int) float64{
		"submitted_ops_per_s": func(int) float64 { return 1000 },
		"read_ready_p99_ms":   func(int) float64 { return 80 },
		"rss_mib_executor":    func(i int) float64 { return 100 + 0.5*float64(i) },
	})
	v := Judge(s, Options{})
	require.False(t, v.OK)
	c := check(t, v, "rss_mib_executor")
	require.True(t, c.Judged)
	require.False(t, c.Flat)
	require.InDelta(t, 104.75, c.First, 1e-9)
	require.InDelta(t, 124.75, c.Last, 1e-9)
	require.InDelta(t, 20/104.75, c.Change, 1e-9)
	require.InDelta(t, 29.5/114.75, c.Trend, 1e-9, "slope 0.05 MiB/s over 590 s, over the mean")
	require.True(t, check(t, v, "read_ready_p99_ms").Flat)

	// A p99 that doubles is not flat; one that moves by 5 ms is, whatever
	// the percentage (the floor).
	s = series(t, 30, map[string]func(int) float64{"read_ready_p99_ms": func(i int) float64 { return 20 + float64(i) }})
	require.False(t, check(t, Judge(s, Options{}), "read_ready_p99_ms").Flat)
	s = series(t, 30, map[string]func(int) float64{"read_ready_p99_ms": func(i int) float64 { return 5 + float64(i)/5 }})
	require.True(t, check(t, Judge(s, Options{}), "read_ready_p99_ms").Flat)
}

func TestJudgeExecutorLimitAndGaps(t *testing.T) {
	t.Parallel()
	s := series(t, 30, map[string]func(int) float64{
		"rss_mib_executor":     func(i int) float64 { return 210 },
		"executor_lag_records": func(i int) float64 { return math.NaN() }, // never read
		"read_ready_p99_ms": func(i int) float64 {
			if i%2 == 0 {
				return math.NaN() // no job became READ_READY in the interval
			}
			return 50
		},
	})
	v := Judge(s, Options{})
	require.False(t, v.ExecutorRSSOK, "210 MiB is over 200")
	require.False(t, v.OK)
	lag := check(t, v, "executor_lag_records")
	require.Zero(t, lag.Rows)
	require.False(t, lag.Flat, "a series never measured is not flat")
	p99 := check(t, v, "read_ready_p99_ms")
	require.Equal(t, 15, p99.Rows)
	require.True(t, p99.Flat)

	v = Judge(s, Options{ExecutorRSSLimitMiB: 300})
	require.True(t, v.ExecutorRSSOK)

	var md bytes.Buffer
	require.NoError(t, v.Markdown(&md))
	require.Contains(t, md.String(), "| rss_mib_executor | 210 | 210 | +0.0% | ±10% or ±4.0 | +0.0% | yes | yes |")
	require.Contains(t, md.String(), "| executor_lag_records | — | — | — |")
	require.Contains(t, md.String(), "Verdict: **not flat**.")
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	_, err := Read(strings.NewReader(""))
	require.ErrorContains(t, err, "no header")
	_, err = Read(strings.NewReader("a,b\n1,2\n"))
	require.ErrorContains(t, err, "elapsed_s")
	_, err = Read(strings.NewReader("elapsed_s,x\n1,abc\n"))
	require.ErrorContains(t, err, "column x")
}

func TestPlot(t *testing.T) {
	t.Parallel()
	s := series(t, 20, map[string]func(int) float64{
		"read_ready_p99_ms": func(i int) float64 { return float64(50 + i) },
		"rss_mib_executor":  func(i int) float64 { return math.NaN() }, // an empty column is left out
	})
	var buf bytes.Buffer
	require.NoError(t, Plot(s, "Soak", &buf))
	img, err := png.Decode(&buf)
	require.NoError(t, err)
	require.Equal(t, 960, img.Bounds().Dx())
	require.Equal(t, 1533, img.Bounds().Dy())
}
