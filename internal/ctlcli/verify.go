package ctlcli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var (
		cfg           admin.VerifyConfig
		projs         []string
		analyticsName string
		showProgress  bool
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the whole log and every projection: gaps, hashes, job results, document view, indexer, analytics, quarantines (exit 3 on any finding)",
		Long: `Walk every document of the operation log in id order and report findings:
stream indexes not contiguous from 0, stored hashes a replay does not
reproduce, keyframes that disagree, job results inconsistent with their
operations (a WRITE_READY job holds exactly the operations of the ranges its
result names, with the op ids the job derives; a FAILED job holds none), the
document view's snapshots and the indexer's rows against the log's heads, the
analytics tables' deduplicated counts per document (with --clickhouse-url)
and quarantined streams. Action timestamps out of order are notes, not
findings.

Projections lag the log: with --wait they are compared again every
--interval until they agree or the wait is over, and only differences that
persist are findings. The run is bounded by --timeout; a run that stops
early (the timeout, Ctrl-C) reports what it checked and the --from to resume
with.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, p := range projs {
				if p != docview.Name && p != indexer.Name {
					return usagef("--projectors takes %s and %s, not %q (analytics is compared with --clickhouse-url)", docview.Name, indexer.Name, p)
				}
			}
			cfg.Docview, cfg.Indexer = slices.Contains(projs, docview.Name), slices.Contains(projs, indexer.Name)
			// --clickhouse-url is the global one (connflags), so a
			// context or the config file can name ClickHouse too.
			clickhouseURL := g.ClickHouseURL
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				reg, err := g.registry()
				if err != nil {
					return err
				}
				cfg.Store, cfg.Registry = s, reg
				if clickhouseURL != "" {
					chCfg, err := analytics.ParseURL(clickhouseURL)
					if err != nil {
						return usageError{err}
					}
					chCfg.Name = analyticsName
					a, err := analytics.NewReader(ctx, chCfg)
					if err != nil {
						return err
					}
					defer a.Close()
					cfg.Analytics = a
				}
				var bar *verifyProgress
				if showProgress || isTerminal(g.errOut) {
					bar = startVerifyProgress(g)
					cfg.Progress = bar.update
				}
				rep, err := admin.Verify(ctx, cfg)
				if bar != nil {
					bar.stop() // before the report, which goes below the bar
				}
				if err != nil {
					return err
				}
				return g.reportVerify(rep)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.From, "from", "", "verify only the documents whose id sorts after this one (the cursor an interrupted run printed)")
	f.DurationVar(&cfg.Wait, "wait", 0, "compare the projections again until they agree or this long has passed (they lag the log)")
	f.DurationVar(&cfg.RetryInterval, "interval", time.Second, "pause between comparisons while --wait lasts")
	f.IntVar(&cfg.PageSize, "page-size", 100, "documents listed at a time")
	f.StringSliceVar(&projs, "projectors", []string{docview.Name, indexer.Name}, "Postgres projections to compare with the log (none: --projectors '')")
	f.StringVar(&analyticsName, "analytics-name", analytics.DefaultName, "name of the analytics projector (its checkpoints and quarantines)")
	f.BoolVar(&showProgress, "progress", false, "draw the progress bar on stderr even when it is not a terminal")
	return cmd
}

// reportVerify renders the report and turns it into the exit code: 3 on
// any finding, 1 when the run stopped early without one.
func (g *globals) reportVerify(rep *admin.VerifyReport) error {
	if err := g.renderVerify(rep); err != nil {
		return err
	}
	if !rep.Complete {
		fmt.Fprintf(g.errOut, "doclogctl: verification stopped before the end of the log; resume with --from %q\n", rep.Next)
	}
	switch {
	case len(rep.Findings) > 0:
		return errProblemsFound
	case !rep.Complete:
		return fmt.Errorf("verification incomplete after %d document(s)", rep.Documents)
	}
	return nil
}

// renderVerify writes the report: JSON with -o json, else a summary line
// and, when there is any, a table of the findings and notes.
func (g *globals) renderVerify(rep *admin.VerifyReport) error {
	if g.output == "json" {
		return g.render(rep, nil)
	}
	verdict := "clean"
	switch {
	case len(rep.Findings) > 0:
		verdict = fmt.Sprintf("%d finding(s)", len(rep.Findings))
	case !rep.Complete:
		verdict = "nothing found so far"
	}
	if len(rep.Notes) > 0 {
		verdict += fmt.Sprintf(", %d note(s)", len(rep.Notes))
	}
	fmt.Fprintf(g.out, "%d document(s), %d stream(s), %d operation(s), %d job(s); checked %s; %d comparison(s): %s\n",
		rep.Documents, rep.Streams, rep.Operations, rep.Jobs, strings.Join(rep.Checked, ", "), rep.Attempts, verdict)
	if len(rep.Findings)+len(rep.Notes) == 0 {
		return nil
	}
	return g.render(rep, func(t table.Writer) {
		t.AppendHeader(table.Row{"kind", "projector", "stream", "index", "job", "finding"})
		for _, f := range rep.Findings {
			t.AppendRow(verifyRow(f))
		}
		for _, f := range rep.Notes {
			row := verifyRow(f)
			row[0] = "note: " + string(f.Kind)
			t.AppendRow(row)
		}
	})
}

func verifyRow(f admin.Finding) table.Row {
	stream, index := f.DocumentID, ""
	if f.Stream != nil {
		stream = f.Stream.String()
	}
	if f.Index >= 0 {
		index = fmt.Sprint(f.Index)
	}
	return table.Row{string(f.Kind), f.Projector, stream, index, f.JobID, abbreviate(f.Message, 120)}
}

// verifyProgress is the progress line of a verification: the phase, the
// documents verified and their rate, the operations and findings, and the
// cursor to resume from. The length of the log is not known in advance, so
// it shows no percentage and no ETA.
type verifyProgress struct {
	line *progressLine
	mu   sync.Mutex
	p    admin.VerifyProgress
	from time.Time
}

func startVerifyProgress(g *globals) *verifyProgress {
	b := newVerifyProgress(time.Now())
	b.line = startProgressLine(g.errOut, b.text)
	return b
}

func newVerifyProgress(start time.Time) *verifyProgress {
	return &verifyProgress{from: start, p: admin.VerifyProgress{Phase: "starting"}}
}

func (b *verifyProgress) update(p admin.VerifyProgress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.p = p
}

func (b *verifyProgress) text(now time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("%s: %s; %d operations, %d findings; --from %q",
		b.p.Phase, countText(int64(b.p.Documents), 0, 0, "documents", now.Sub(b.from)), b.p.Operations, b.p.Findings, b.p.Cursor)
}

func (b *verifyProgress) stop() { b.line.stop() }
