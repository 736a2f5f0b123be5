package ctlcli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/catalog"
)

func newProjectorCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "projector", Short: "Projectors: checkpoints, quarantines, lag and rebuilds"}
	names := g.projectorNames()
	list := &cobra.Command{
		Use:   "list",
		Short: "Each projector's group, checkpoints (offset and epoch per partition) and quarantined streams",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				st, err := admin.ListProjectors(ctx, s, g.topicPrefix, names)
				if err != nil {
					return err
				}
				return g.render(st, func(t table.Writer) {
					t.AppendHeader(table.Row{"projector", "group", "partitions", "offsets", "epochs", "quarantined"})
					for _, p := range st {
						var sum, maxEpoch int64
						for _, c := range p.Checkpoints {
							sum += max(c.NextOffset, 0)
							maxEpoch = max(maxEpoch, c.Epoch)
						}
						t.AppendRow(table.Row{p.Name, p.Group, len(p.Checkpoints), sum, maxEpoch, len(p.Quarantines)})
					}
					for _, p := range st {
						for _, q := range p.Quarantines {
							t.AppendFooter(table.Row{p.Name, "quarantined", q.Stream.String(), q.Index, q.ErrorName, abbreviate(q.Reason, 60)})
						}
					}
				})
			})
		},
	}
	lag := &cobra.Command{
		Use:   "lag",
		Short: "Each projector group's lag per write-ready partition, in records and seconds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			groups := make([]string, len(names))
			for i, n := range names {
				groups[i] = g.topicPrefix + projectors.DefaultGroupPrefix + n
			}
			lags, err := kafka.ConsumerLag(ctx, g.kafka(), groups...)
			if err != nil {
				return err
			}
			if lags == nil {
				lags = []kafka.PartitionLag{}
			}
			return g.render(lags, func(t table.Writer) {
				t.AppendHeader(table.Row{"group", "partition", "committed", "end", "lag", "lag (s)", "member"})
				for _, l := range lags {
					t.AppendRow(table.Row{l.Group, l.Partition, l.Committed, l.End, l.Lag, fmt.Sprintf("%.1f", l.LagSeconds), l.Member})
				}
			})
		},
	}
	var showProgress bool
	rebuild := &cobra.Command{
		Use:   "rebuild NAME",
		Short: "Rebuild a projector's tables without downtime (build from the log, catch up, switch atomically)",
		Long: `Rebuild builds a new generation of the projector's tables from the log
(every stream verified), catches it up on the write-ready topic from the
live projector's checkpoints, and swaps it in for the live tables in one
step while the live projector keeps serving and writing; the old tables are
dropped after. Readers query the same table names throughout. Rebuilding
analytics writes to ClickHouse: it needs --clickhouse-url (or the
context's clickhouse-url), and the new tables are renamed in with one
RENAME TABLE.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A name no projector has is a usage error, refused before
			// anything is opened.
			if _, err := catalog.Lookup(args[0]); err != nil {
				return usageError{err}
			}
			if !slices.Contains(names, args[0]) {
				return usagef("rebuild takes %s, not %q", strings.Join(names, ", "), args[0])
			}
			clickhouseURL := g.ClickHouseURL
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				reg, err := g.registry()
				if err != nil {
					return err
				}
				p, closeP, err := openProjector(ctx, args[0], clickhouseURL, "rebuilding analytics")
				if err != nil {
					return err
				}
				defer closeP()
				stop := g.spinner(showProgress, "rebuilding "+args[0])
				rep, err := admin.RebuildProjector(ctx, s, reg, g.kafka(), g.topicPrefix, p, nil)
				stop()
				if err != nil {
					return err
				}
				return g.render(rep, func(t table.Writer) {
					t.AppendHeader(table.Row{"generation", "documents", "operations applied", "quarantined", "catch-up"})
					t.AppendRow(table.Row{rep.Generation, rep.Built.Documents, rep.Built.Healed, rep.Built.Quarantined, rep.CatchUp.Round(time.Millisecond)})
				})
			})
		},
	}
	rebuild.Flags().BoolVar(&showProgress, "progress", false, "show a progress indicator on standard error")
	cmd.AddCommand(list, lag, rebuild)
	return cmd
}

// spinner shows, when asked, a progress line on standard error while long
// work of unknown size runs: what it does and for how long so far, since
// nothing reports a count to show. The returned func ends it.
func (g *globals) spinner(on bool, message string) func() {
	if !on {
		return func() {}
	}
	start := time.Now()
	return startProgressLine(g.errOut, func(now time.Time) string { return elapsedText(message, now.Sub(start)) }).stop
}

// elapsedText is the line of work whose size is unknown: "message: 1.2s".
func elapsedText(message string, elapsed time.Duration) string {
	return message + ": " + roundDuration(elapsed)
}
