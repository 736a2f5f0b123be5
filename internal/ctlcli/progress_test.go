package ctlcli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/admin/bench"
)

func TestCountText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "250/1000 jobs (25%), 50.0 jobs/s, ETA 15s", countText(250, 1000, 0, "jobs", 5*time.Second))
	require.Equal(t, "600/1000 jobs (60%), 20.0 jobs/s, ETA 20s", countText(600, 1000, 400, "jobs", 10*time.Second),
		"the rate counts only what was done in the time given")
	require.Equal(t, "0/1000 jobs (0%), 0.0 jobs/s, ETA unknown", countText(0, 1000, 0, "jobs", 2*time.Second))
	require.Equal(t, "1000/1000 jobs (100%), 100.0 jobs/s, done", countText(1000, 1000, 0, "jobs", 10*time.Second))
	require.Equal(t, "42 documents in 2.1s, 20.0 documents/s", countText(42, 0, 0, "documents", 2100*time.Millisecond),
		"without a total: no percentage, no ETA")
	require.Equal(t, "3s of 10s (30%), 7s left", timeText(3*time.Second, 10*time.Second))
	require.Equal(t, "rebuilding docview: 700ms", elapsedText("rebuilding docview", 662*time.Millisecond))
	require.Equal(t, "2m5s", roundDuration(125*time.Second+400*time.Millisecond))
}

// The bench's line: its percentage is the submission time against
// --duration, the same figures it prints, and while draining it counts the
// jobs READ_READY of those submitted, at the drain's own rate.
func TestBenchProgressText(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	b := newBenchProgress(30*time.Second, func() time.Time { return now })
	now = t0.Add(1500 * time.Millisecond)
	require.Equal(t, "setup: 1.5s", b.text(now))

	b.update(bench.Progress{Phase: "submit", Elapsed: 12 * time.Second, Total: 30 * time.Second, Submitted: 600, WriteReady: -1, ReadReady: -1})
	require.Equal(t, "submit: 12s of 30s (40%), 18s left; 600 jobs submitted, 50.0 jobs/s", b.text(now.Add(12*time.Second)))

	now = t0.Add(32 * time.Second)
	b.update(bench.Progress{Phase: "drain", Elapsed: 30 * time.Second, Submitted: 1500, WriteReady: 1400, ReadReady: 1000})
	b.update(bench.Progress{Phase: "drain", Elapsed: 30 * time.Second, Submitted: 1500, WriteReady: 1500, ReadReady: 1200})
	require.Equal(t, "drain: READ_READY 1200/1500 jobs (80%), 100.0 jobs/s, ETA 3s; WRITE_READY 1500", b.text(now.Add(2*time.Second)))

	now = t0.Add(40 * time.Second)
	b.update(bench.Progress{Phase: "statistics", Elapsed: 30 * time.Second, Submitted: 1500, WriteReady: 1500, ReadReady: 1500})
	require.Equal(t, "statistics: 700ms; 1500 jobs submitted, 1500 READ_READY", b.text(now.Add(700*time.Millisecond)))
}

func TestVerifyProgressText(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newVerifyProgress(t0)
	require.Equal(t, `starting: 0 documents in 0s, 0.0 documents/s; 0 operations, 0 findings; --from ""`, b.text(t0))
	b.update(admin.VerifyProgress{Phase: "log", Documents: 30, Operations: 900, Findings: 1, Cursor: "doc-30"})
	require.Equal(t, `log: 30 documents in 4s, 7.5 documents/s; 900 operations, 1 findings; --from "doc-30"`, b.text(t0.Add(4*time.Second)))
}

// Off a terminal the line is written once per tick and once more at the
// end, escaped.
func TestProgressLineOffTerminal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := startProgressLine(&buf, func(time.Time) string { return "phase: \x1b[31mred" })
	p.stop()
	p.stop()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 2)
	for _, l := range lines {
		require.Equal(t, `phase: \x1b[31mred`, l)
	}
}
