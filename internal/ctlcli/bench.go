package ctlcli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/admin/bench"
	"github.com/doclog/doclog/internal/telemetry"
)

func newBenchCmd(g *globals) *cobra.Command {
	var (
		cfg          bench.Config
		showProgress bool
		logLevel     string
		cpuProfile   string
		stateSize    string
		seriesFile   string
		seriesProcs  []string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the pipeline with workload W1: throughput and latency to WRITE_READY and READ_READY",
		Long: `Measure doclog with workload W1: --documents documents of doclog/json
receive MERGE_PATCH actions, --actions per round, for --duration, or as a fixed
workload: --rounds rounds per document (--rounds 1 is W1 as the reference
reactor's comparison runs it, 200 × 50 = 10,000 operations), or --operations
in all (one of the three; the report states which). Mode single
sends one action per job, each document's next job once the previous one was
acknowledged, all documents at once; mode batch sends one job of --actions
actions per document at a time. Jobs go through the ingest API (--ingest-url)
or straight to the jobs topic (--via kafka). The loop is closed unless --rate
(operations/s over all documents) opens it, for latency at a fixed load.

Against a running doclog give --ingest-url (or --via kafka), --database-url and
--kafka-seeds. With --embedded the ingest, executor and docview and indexer
roles run in this process against the real Postgres and Kafka given, in a
schema of their own (doclog_bench_<id>, migrated first) and on topics under a
fresh prefix, both deleted after: a doclog already using the database keeps
its data and its projectors' positions.

The report: jobs/s and operations/s to WRITE_READY and READ_READY, latency
percentiles from submission to each, peak RSS, the CPU time per operation of
each process on this host (this one, the run's doclog processes, Postgres, the
Kafka broker), Postgres transactions (and
statements, with pg_stat_statements) per operation, and with --baseline a raw
COPY of the run's operation rows and the ratio of doclog to it. Runs shorter
than 30 s measure start-up and drain more than the steady state: treat them
as smoke tests. docs/benchmarks.md describes the method. --timeout does not
apply: --duration (or the fixed workload) and --drain bound the run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.DatabaseURL, cfg.DatabaseConnectTimeout = g.DatabaseURL, g.DatabaseConnectTimeout
			cfg.Kafka = g.kafka()
			cfg.TopicPrefix = g.topicPrefix
			if !cmd.Flags().Changed("duration") && (cfg.Rounds != 0 || cfg.Operations != 0) {
				cfg.Duration = 0 // the fixed workload replaces the default duration
			}
			if stateSize != "" {
				n, err := parseSize(stateSize)
				if err != nil {
					return usageError{err}
				}
				cfg.StateBytes = n
			}
			procs, err := parseSeriesProcesses(seriesProcs)
			if err != nil {
				return usageError{err}
			}
			cfg.SeriesProcesses = procs
			cfg = cfg.WithDefaults()
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			if logLevel != "" {
				logger, err := telemetry.NewLogger(telemetry.LogConfig{Level: logLevel, Encoding: "console"})
				if err != nil {
					return usageError{err}
				}
				defer func() { _ = logger.Sync() }()
				cfg.Logger = logger
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("creating the CPU profile: %w", err)
				}
				defer f.Close()
				cfg.CPUProfile = f
			}
			if seriesFile != "" {
				f, err := os.Create(seriesFile)
				if err != nil {
					return fmt.Errorf("creating the series file: %w", err)
				}
				defer f.Close()
				cfg.Series = f
			}
			var bar *benchProgress
			if showProgress || isTerminal(g.errOut) {
				bar = startProgress(g.errOut, cfg.Duration)
				cfg.Progress = bar.update
			}
			rep, err := bench.Run(cmd.Context(), cfg)
			if bar != nil {
				bar.stop() // before the report, which goes below the bar
			}
			if err != nil {
				return err
			}
			if err := renderBench(g, rep); err != nil {
				return err
			}
			if !rep.Drained {
				fmt.Fprintf(g.errOut, "doclogctl: not every job reached READ_READY within --drain %s\n", cfg.Drain)
				return errProblemsFound
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Mode, "mode", bench.ModeSingle, "single (one action per job) or batch (one job of --actions actions per document)")
	f.StringVar(&cfg.Via, "via", bench.ViaHTTP, "submit through the ingest API (http) or straight to the jobs topic (kafka)")
	f.IntVar(&cfg.Documents, "documents", bench.DefaultDocuments, "documents benchmarked at once (D)")
	f.IntVar(&cfg.ActionsPerDocument, "actions", bench.DefaultActions, "actions per document and round (K); in mode batch, the actions of one job")
	f.DurationVar(&cfg.Duration, "duration", bench.DefaultDuration, "how long jobs are submitted (under 30s is noise)")
	f.IntVar(&cfg.Rounds, "rounds", 0, "fixed workload: every document receives this many rounds of --actions actions, then the run stops (excludes --duration and --operations)")
	f.IntVar(&cfg.Operations, "operations", 0, "fixed workload: this many operations over all documents, then the run stops (excludes --duration and --rounds)")
	f.Float64Var(&cfg.Rate, "rate", 0, "open loop: submit this many operations/s over all documents (0: closed loop)")
	f.IntVar(&cfg.Coalesce, "coalesce", 0, "above 0: submit each job through the client package's Batcher, which sends the jobs submitted while its requests are in flight together in POST /v1/jobs:batch, up to this many per request (each document still one job at a time)")
	f.IntVar(&cfg.JobsPerRequest, "jobs-per-request", 1, "above 1: submit through the ingest API's POST /v1/jobs:batch, up to this many jobs per request (the documents in groups of this many)")
	f.DurationVar(&cfg.Drain, "drain", bench.DefaultDrain, "after submitting, how long to wait for every job to reach READ_READY")
	f.DurationVar(&cfg.SampleInterval, "sample-interval", bench.DefaultSampleInterval, "how often the document view is sampled for READ_READY besides at each of its projector's commits (with --sample-poll-only, the latency resolution)")
	f.BoolVar(&cfg.SamplePollOnly, "sample-poll-only", false, "sample the document view for READ_READY only every --sample-interval, not also at each of its projector's commits: the latency's resolution is then the interval")
	f.StringVar(&stateSize, "state-size", "", "workload W2: fill each document's state to this size first (e.g. 1KB, 100KB, 1MB), then change one record per action")
	f.BoolVar(&cfg.Baseline, "baseline", false, "also COPY the run's operation rows into a scratch table, for the ratio doclog/raw")
	f.IntVar(&cfg.BaselineChunk, "baseline-chunk", bench.DefaultBaselineChunk, "rows per COPY of the baseline")
	f.StringVar(&cfg.IngestURL, "ingest-url", "", "ingest API of a running doclog, e.g. http://localhost:8080")
	f.StringVar(&cfg.AuthToken, "auth-token", "", "bearer token for the ingest API")
	f.BoolVar(&cfg.Embedded, "embedded", false, "run ingest, executor and projectors in this process against --database-url and --kafka-seeds")
	f.Int32Var(&cfg.Partitions, "partitions", bench.DefaultPartitions, "partitions of the jobs topic of an --embedded run")
	f.BoolVar(&cfg.NoBackpressure, "no-backpressure", false, "turn the embedded ingest's backpressure off (its executor-lag bounds), to measure the backlog an unpaced closed loop builds")
	f.BoolVar(&cfg.AsyncAnnounce, "async-announce", false, "run the embedded executor announcing without waiting for the brokers before its next batch (doclog serve's --executor-async-announce)")
	f.StringVar(&seriesFile, "series", "", "write a time series as CSV to this file: a row per --series-interval of throughput, READ_READY p50/p99, consumer lag, and memory and CPU per process")
	f.DurationVar(&cfg.SeriesInterval, "series-interval", bench.DefaultSeriesInterval, "the length of a row of --series")
	f.StringArrayVar(&seriesProcs, "series-process", nil, "NAME=PID: a process (with its descendants) whose memory and CPU --series follows; repeat it (default: this process, and the processes named doclog)")
	f.BoolVar(&showProgress, "progress", false, "draw the progress bar on stderr even when it is not a terminal")
	f.StringVar(&cpuProfile, "cpu-profile", "", "write a pprof CPU profile of this process over submission and drain (with --embedded: of the roles at work)")
	f.StringVar(&logLevel, "log-level", "", "log the embedded roles on stderr at this level (default: no logs)")
	return cmd
}

// parseSeriesProcesses reads --series-process NAME=PID values.
func parseSeriesProcesses(values []string) ([]bench.SeriesProcess, error) {
	var out []bench.SeriesProcess
	for _, v := range values {
		name, pid, ok := strings.Cut(v, "=")
		n, err := strconv.Atoi(pid)
		if !ok || name == "" || err != nil || n <= 0 {
			return nil, fmt.Errorf("--series-process takes NAME=PID, not %q", v)
		}
		out = append(out, bench.SeriesProcess{Name: name, PID: n})
	}
	return out, nil
}

// renderBench writes the report: JSON with -o json, else a table of the
// stages and one of the run's other figures.
func renderBench(g *globals, rep *bench.Report) error {
	if g.output == "json" {
		return g.render(rep, nil)
	}
	loop := rep.Loop
	if rep.Loop == "open" {
		loop = fmt.Sprintf("open at %.0f ops/s", rep.RateOpsPerSec)
	}
	where := "against a running doclog"
	if rep.Embedded {
		where = "embedded"
	}
	workload := "W1"
	if rep.StateBytes > 0 {
		workload = fmt.Sprintf("W2 (states of %d bytes)", rep.StateBytes)
	}
	via := rep.Via
	if rep.Coalesce > 0 {
		via = fmt.Sprintf("%s (coalesced by the client's batcher, up to %d jobs per request)", via, rep.Coalesce)
	}
	if rep.JobsPerRequest > 1 {
		via = fmt.Sprintf("%s (up to %d jobs per request)", via, rep.JobsPerRequest)
	}
	fmt.Fprintf(g.out, "%s mode %s via %s, %s loop, %s: %d documents, %d actions per round, %s\n",
		workload, rep.Mode, via, loop, where, rep.Documents, rep.ActionsPerDocument, rep.Workload)
	if err := g.render(rep, func(t table.Writer) {
		t.AppendHeader(table.Row{"stage", "jobs", "ops", "jobs/s", "ops/s", "p50 ms", "p95 ms", "p99 ms", "max ms"})
		t.AppendRow(table.Row{"submitted", rep.Submitted.Jobs, rep.Submitted.Operations,
			rate(rep.Submitted.Jobs, rep.SubmitSeconds), rate(rep.Submitted.Operations, rep.SubmitSeconds)})
		for _, s := range []struct {
			name string
			st   bench.Stage
		}{{"WRITE_READY", rep.WriteReady}, {"READ_READY", rep.ReadReady}} {
			t.AppendRow(table.Row{s.name, s.st.Jobs, s.st.Operations, f1(s.st.JobsPerSec), f1(s.st.OpsPerSec),
				f1(s.st.LatencyP50Ms), f1(s.st.LatencyP95Ms), f1(s.st.LatencyP99Ms), f1(s.st.LatencyMaxMs)})
		}
		if b := rep.Baseline; b != nil {
			t.AppendRow(table.Row{"raw COPY", "", b.Rows, "", f1(b.RowsPerSec)})
		}
	}); err != nil {
		return err
	}
	if len(rep.Legs) > 0 {
		if err := g.render(rep, func(t table.Writer) {
			t.AppendHeader(table.Row{"leg to READ_READY", "jobs", "mean ms", "p50 ms", "p95 ms", "p99 ms", "max ms"})
			for _, l := range rep.Legs {
				t.AppendRow(table.Row{l.Name, l.Jobs, f1(l.MeanMs), f1(l.P50Ms), f1(l.P95Ms), f1(l.P99Ms), f1(l.MaxMs)})
			}
		}); err != nil {
			return err
		}
	}
	return g.render(rep, func(t table.Writer) {
		if b := rep.Baseline; b != nil {
			t.AppendRow(table.Row{"doclog/raw (ops/s)", fmt.Sprintf("%.3f to WRITE_READY, %.3f to READ_READY (COPY in %d-row chunks)",
				b.RatioWriteReady, b.RatioReadReady, b.ChunkRows)})
		}
		pg := rep.Postgres
		stmts := "statements unknown (no pg_stat_statements)"
		if pg.StatementsPerOp != nil {
			stmts = fmt.Sprintf("%.2f statements", *pg.StatementsPerOp)
		}
		t.AppendRow(table.Row{"postgres per op", fmt.Sprintf("%.2f transactions, %s, %.2f tuples written, %.2f fetched (database-wide)",
			pg.TransactionsPerOp, stmts, pg.TuplesWrittenPerOp, pg.TuplesFetchedPerOp)})
		var rss []string
		for _, p := range rep.PeakRSS {
			rss = append(rss, fmt.Sprintf("%s (pid %d) %.0f MiB", p.Name, p.PID, float64(p.PeakBytes)/(1<<20)))
		}
		if len(rss) == 0 {
			rss = []string{"unknown (no doclog process on this host)"}
		}
		t.AppendRow(table.Row{"peak RSS", strings.Join(rss, "; ")})
		if c := rep.CPU; c != nil {
			var parts []string
			for _, p := range c.Processes {
				parts = append(parts, fmt.Sprintf("%s %.0f", p.Name, p.MicrosPerOp))
			}
			t.AppendRow(table.Row{"CPU µs per op", fmt.Sprintf("%.0f in all (%.2f cores over %.0f s): %s",
				c.MicrosPerOp, c.Seconds/max(c.WallSeconds, 1e-9), c.WallSeconds, strings.Join(parts, "; "))})
		}
		t.AppendRow(table.Row{"drained", fmt.Sprintf("%v: %d jobs failed, %d submissions failed; READ_READY sampled every %.0f ms",
			rep.Drained, rep.Failed, rep.SubmitFailures, rep.SampleIntervalMs)})
		t.AppendRow(table.Row{"refused (429)", fmt.Sprintf("%d submissions, waited out %.1f s of Retry-After over all documents", rep.Refusals, rep.RefusedSeconds)})
		if rep.LastSubmitErr != "" {
			t.AppendRow(table.Row{"last submission error", rep.LastSubmitErr})
		}
		if rep.LegsError != "" {
			t.AppendRow(table.Row{"legs", "unknown: " + rep.LegsError})
		}
	})
}

// parseSize reads a size such as 100KB or 1MB (powers of 1024; B, KB, MB,
// or a plain number of bytes).
func parseSize(s string) (int, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KB", 1 << 10}, {"MB", 1 << 20}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(t))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--state-size must be a size such as 1KB, 100KB or 1MB, not %q", s)
	}
	return n * mult, nil
}

func rate(n int, seconds float64) string {
	if seconds <= 0 {
		return ""
	}
	return f1(float64(n) / seconds)
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

// isTerminal reports whether w is a character device, where a progress bar
// belongs; a pipe or a file gets none unless asked.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// benchProgress is the progress line of a run. While submitting it shows
// the submission time against --duration and the jobs submitted; while
// draining, the jobs READ_READY of those submitted, at the rate they have
// become so since the drain began, and the time that leaves; in the other
// phases, how long the phase has taken.
type benchProgress struct {
	line  *progressLine
	total time.Duration
	now   func() time.Time

	mu    sync.Mutex
	p     bench.Progress
	since time.Time // when the phase began
	from  int       // ReadReady when the phase began
}

func startProgress(w io.Writer, total time.Duration) *benchProgress {
	b := newBenchProgress(total, time.Now)
	b.line = startProgressLine(w, b.text)
	return b
}

func newBenchProgress(total time.Duration, now func() time.Time) *benchProgress {
	return &benchProgress{total: total, now: now, since: now(),
		p: bench.Progress{Phase: "setup", WriteReady: -1, ReadReady: -1}}
}

func (b *benchProgress) update(p bench.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.Phase != b.p.Phase {
		b.since, b.from = b.now(), max(p.ReadReady, 0)
	}
	b.p = p
}

func (b *benchProgress) text(now time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.p
	switch {
	case p.Phase == "submit" && p.Jobs > 0:
		return "submit: " + countText(int64(p.Submitted), int64(p.Jobs), 0, "jobs", p.Elapsed)
	case p.Phase == "submit":
		rate := 0.0
		if p.Elapsed > 0 {
			rate = float64(p.Submitted) / p.Elapsed.Seconds()
		}
		return fmt.Sprintf("submit: %s; %d jobs submitted, %.1f jobs/s", timeText(p.Elapsed, b.total), p.Submitted, rate)
	case p.Phase == "drain":
		return fmt.Sprintf("drain: READ_READY %s; WRITE_READY %d", countText(int64(p.ReadReady), int64(p.Submitted), int64(b.from), "jobs", now.Sub(b.since)), p.WriteReady)
	case p.ReadReady >= 0:
		return fmt.Sprintf("%s: %s; %d jobs submitted, %d READ_READY", p.Phase, roundDuration(now.Sub(b.since)), p.Submitted, p.ReadReady)
	default:
		return fmt.Sprintf("%s: %s", p.Phase, roundDuration(now.Sub(b.since)))
	}
}

func (b *benchProgress) stop() { b.line.stop() }
