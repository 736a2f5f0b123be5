// Package soak reads the time series `doclogctl bench --series` writes,
// judges whether it stays flat over a long run (the soak of
// docs/benchmarks.md), and draws it as a PNG.
//
// A series is flat when the mean of its last third differs from the mean
// of its first third by at most Tolerance of the first (10%), or by at
// most its floor, whichever is larger: the floors keep figures near zero
// (a lag of a few records, a p99 of a few milliseconds) from failing on
// noise. The rows of the first Warmup are left out of both, since the
// processes' heaps and the broker's JIT settle then (soakreport leaves out
// the first minute by default). The slope of a
// least-squares line over the same rows, times the span and over the
// mean, is reported beside it as the trend over the run; the verdict is
// the thirds'.
package soak

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Series is the CSV's columns by name, each a value per row (NaN for an
// empty cell).
type Series struct {
	Header  []string
	Columns map[string][]float64
}

// Read parses the CSV `doclogctl bench --series` writes.
func Read(r io.Reader) (*Series, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading the series: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("the series is empty: no header")
	}
	s := &Series{Header: rows[0], Columns: make(map[string][]float64, len(rows[0]))}
	for n, row := range rows[1:] {
		for i, h := range s.Header {
			v := math.NaN()
			if row[i] != "" {
				if v, err = strconv.ParseFloat(row[i], 64); err != nil {
					return nil, fmt.Errorf("reading row %d of the series, column %s: %w", n+1, h, err)
				}
			}
			s.Columns[h] = append(s.Columns[h], v)
		}
	}
	if _, ok := s.Columns["elapsed_s"]; !ok {
		return nil, errors.New("the series has no elapsed_s column")
	}
	return s, nil
}

// Len is the number of rows.
func (s *Series) Len() int { return len(s.Columns["elapsed_s"]) }

// Processes lists the process columns' names (rss_mib_<name>), in order.
func (s *Series) Processes() []string {
	var out []string
	for _, h := range s.Header {
		if name, ok := strings.CutPrefix(h, "rss_mib_"); ok {
			out = append(out, name)
		}
	}
	return out
}

// Options tunes Judge; the zero value takes the defaults.
type Options struct {
	// Tolerance is the largest relative change of a flat series. Default
	// 0.10.
	Tolerance float64
	// Warmup is left out at the start; zero leaves out nothing.
	// DefaultWarmup suits runs of ten minutes and more.
	Warmup time.Duration
	// ExecutorRSSLimitMiB bounds the executor's resident memory at every
	// row. Default 200.
	ExecutorRSSLimitMiB float64
	// Unjudged are process columns shown but not judged: the load
	// generator holds every job it submitted, so it grows by design, and
	// the Postgres and Kafka servers fill their caches. Default bench,
	// embedded, postgres, kafka.
	Unjudged []string
}

// Defaults of Options.
const (
	DefaultTolerance           = 0.10
	DefaultWarmup              = time.Minute
	DefaultExecutorRSSLimitMiB = 200
)

func (o Options) withDefaults() Options {
	if o.Tolerance == 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.ExecutorRSSLimitMiB == 0 {
		o.ExecutorRSSLimitMiB = DefaultExecutorRSSLimitMiB
	}
	if o.Unjudged == nil {
		o.Unjudged = []string{"bench", "embedded", "postgres", "kafka"}
	}
	return o
}

// Check is one series compared between its first and last thirds.
type Check struct {
	Column string
	// Judged is false for a series shown for information only.
	Judged bool
	// First and Last are the means of the thirds; Change is (Last -
	// First) / First.
	First, Last, Change float64
	// Floor is the absolute change that is flat whatever the relative one.
	Floor float64
	// Trend is the least-squares slope times the span over the mean.
	Trend float64
	// Rows is how many rows had a value after the warm-up.
	Rows int
	Flat bool
}

// Verdict is the soak's outcome.
type Verdict struct {
	Checks []Check
	// ExecutorRSSMaxMiB is the executor's largest resident memory in any
	// row (warm-up included), NaN without an executor column.
	ExecutorRSSMaxMiB   float64
	ExecutorRSSLimitMiB float64
	ExecutorRSSOK       bool
	// Tolerance is the relative change judged flat.
	Tolerance float64
	// Rows and Seconds are the series' length after the warm-up.
	Rows    int
	Seconds float64
	// OK is every judged check flat and the executor's memory within its
	// limit.
	OK bool
}

// Floors: changes below these are flat whatever their relative size.
const (
	rssFloorMiB = 4
	p99FloorMs  = 10
	// A lag floor is this long at the run's mean submitted rate: the
	// committed offsets themselves move in steps of the commit interval.
	lagFloor = time.Second
)

// Judge compares each judged series' first and last thirds after the
// warm-up.
func Judge(s *Series, opts Options) Verdict {
	o := opts.withDefaults()
	elapsed := s.Columns["elapsed_s"]
	from := 0
	for from < len(elapsed) && elapsed[from] <= o.Warmup.Seconds() {
		from++
	}
	v := Verdict{ExecutorRSSLimitMiB: o.ExecutorRSSLimitMiB, ExecutorRSSMaxMiB: math.NaN(), Rows: len(elapsed) - from, Tolerance: o.Tolerance}
	if v.Rows > 0 {
		v.Seconds = elapsed[len(elapsed)-1] - elapsed[from]
	}
	rate := mean(s.Columns["submitted_ops_per_s"][from:])
	type target struct {
		col    string
		floor  float64
		judged bool
	}
	targets := []target{
		{"read_ready_p99_ms", p99FloorMs, true},
		{"executor_lag_records", rate * lagFloor.Seconds(), true},
		{"projector_lag_records", rate * lagFloor.Seconds(), true},
	}
	for _, p := range s.Processes() {
		judged := true
		for _, u := range o.Unjudged {
			if p == u {
				judged = false
			}
		}
		targets = append(targets, target{"rss_mib_" + p, rssFloorMiB, judged})
	}
	for _, p := range s.Processes() {
		targets = append(targets, target{"cpu_cores_" + p, 0.05, false})
	}
	targets = append(targets, target{"read_ready_ops_per_s", rate * 0.01, false})
	v.OK = true
	for _, t := range targets {
		col, ok := s.Columns[t.col]
		if !ok {
			continue
		}
		c := compare(elapsed[from:], col[from:], t.floor, o.Tolerance)
		c.Column, c.Judged = t.col, t.judged
		if c.Judged && !c.Flat {
			v.OK = false
		}
		v.Checks = append(v.Checks, c)
	}
	if col, ok := s.Columns["rss_mib_executor"]; ok {
		for _, x := range col {
			if !math.IsNaN(x) && (math.IsNaN(v.ExecutorRSSMaxMiB) || x > v.ExecutorRSSMaxMiB) {
				v.ExecutorRSSMaxMiB = x
			}
		}
	}
	v.ExecutorRSSOK = !math.IsNaN(v.ExecutorRSSMaxMiB) && v.ExecutorRSSMaxMiB <= o.ExecutorRSSLimitMiB
	v.OK = v.OK && v.ExecutorRSSOK
	return v
}

// compare judges one series: too few rows (under three with a value) is
// not flat, since nothing was shown.
func compare(x, y []float64, floor, tol float64) Check {
	var xs, ys []float64
	for i := range y {
		if !math.IsNaN(y[i]) {
			xs, ys = append(xs, x[i]), append(ys, y[i])
		}
	}
	c := Check{Rows: len(ys), Floor: floor, First: math.NaN(), Last: math.NaN(), Change: math.NaN(), Trend: math.NaN()}
	if len(ys) < 3 {
		return c
	}
	third := len(ys) / 3
	c.First, c.Last = mean(ys[:third]), mean(ys[len(ys)-third:])
	delta := c.Last - c.First
	if c.First != 0 {
		c.Change = delta / c.First
	}
	c.Flat = math.Abs(delta) <= max(tol*math.Abs(c.First), floor)
	if m := mean(ys); m != 0 {
		c.Trend = slope(xs, ys) * (xs[len(xs)-1] - xs[0]) / m
	}
	return c
}

// mean of the values that are not NaN; NaN when there are none.
func mean(v []float64) float64 {
	var sum float64
	var n int
	for _, x := range v {
		if !math.IsNaN(x) {
			sum += x
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// slope of the least-squares line through the points.
func slope(x, y []float64) float64 {
	mx, my := mean(x), mean(y)
	var num, den float64
	for i := range x {
		num += (x[i] - mx) * (y[i] - my)
		den += (x[i] - mx) * (x[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// Markdown writes the verdict as a table, then a line per target.
func (v Verdict) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| series | first third | last third | change | flat within | trend (fit) | judged | flat |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range v.Checks {
		judged, flat := "no", "—"
		if c.Judged {
			judged = "yes"
		}
		if c.Rows >= 3 {
			flat = map[bool]string{true: "yes", false: "**no**"}[c.Flat]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | ±%.0f%% or ±%s | %s | %s | %s |\n", c.Column, fig(c.First), fig(c.Last),
			pct(c.Change), v.Tolerance*100, fig(c.Floor), pct(c.Trend), judged, flat)
	}
	fmt.Fprintf(&b, "\nAfter the warm-up: %d rows over %.0f s. Executor RSS at most %s MiB (limit %.0f): %s. Verdict: %s.\n",
		v.Rows, v.Seconds, fig(v.ExecutorRSSMaxMiB), v.ExecutorRSSLimitMiB, okText(v.ExecutorRSSOK), map[bool]string{true: "flat", false: "**not flat**"}[v.OK])
	_, err := io.WriteString(w, b.String())
	return err
}

func okText(ok bool) string {
	if ok {
		return "within"
	}
	return "**over or unknown**"
}

func fig(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case math.Abs(x) >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 1:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 3, 64)
	}
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", x*100)
}
