package ctlcli

import (
	"fmt"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/catalog"
)

// defaultGroups are the consumer groups of a deployment running every
// role and projector.
var defaultGroups = func() []string {
	groups := []string{executor.DefaultGroup}
	for _, name := range catalog.Names() {
		groups = append(groups, projectors.DefaultGroupPrefix+name)
	}
	return groups
}()

type statusReport struct {
	Brokers []int32                  `json:"brokers"`
	Topics  []admin.TopicDescription `json:"topics"`
	Lag     []kafka.PartitionLag     `json:"lag"`
	// Migrations count every Postgres migration, the log's and the
	// projectors', as migrate status lists them and migrate up applies them.
	Migrations struct {
		Applied int `json:"applied"`
		Known   int `json:"known"`
	} `json:"migrations"`
	Tail postgres.TailStatus `json:"tail"`
}

func newStatusCmd(g *globals) *cobra.Command {
	groups := defaultGroups
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Brokers, topics, consumer lag per partition (records and seconds), migrations and the log's tail",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			var rep statusReport
			cl, err := kafka.NewClient(g.kafka(), nil)
			if err != nil {
				return err
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			brokers, err := adm.ListBrokers(ctx)
			if err != nil {
				return fmt.Errorf("listing brokers: %w", err)
			}
			rep.Brokers = brokers.NodeIDs()
			if rep.Topics, err = admin.DescribeTopics(ctx, adm, g.topics().All()...); err != nil {
				return err
			}
			if rep.Lag, err = kafka.ConsumerLag(ctx, g.kafka(), prefixed(g.topicPrefix, groups)...); err != nil {
				return err
			}
			store, err := g.store(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			statuses, err := admin.MigrationStatuses(ctx, store)
			if err != nil {
				return err
			}
			rep.Migrations.Applied, rep.Migrations.Known = admin.MigrationCounts(statuses)
			if rep.Tail, err = store.TailStatus(ctx); err != nil {
				return err
			}
			if g.output == "json" {
				return g.render(rep, nil)
			}
			if err := g.render(rep, func(t table.Writer) {
				t.SetTitle("brokers %v · migrations %d/%d applied · oldest transaction %s · last write %s",
					rep.Brokers, rep.Migrations.Applied, rep.Migrations.Known,
					rep.Tail.OldestTransactionAge.Round(time.Millisecond), age(rep.Tail.LastWrittenAt))
				t.AppendHeader(table.Row{"topic", "partitions", "replicas", "retention"})
				for _, tp := range rep.Topics {
					if !tp.Exists {
						t.AppendRow(table.Row{tp.Topic, "missing", "", ""})
						continue
					}
					t.AppendRow(table.Row{tp.Topic, tp.Partitions, tp.Replication, retention(tp.RetentionMs)})
				}
			}); err != nil {
				return err
			}
			return g.render(rep, func(t table.Writer) {
				t.AppendHeader(table.Row{"group", "topic", "partition", "committed", "end", "lag", "lag (s)", "member"})
				for _, l := range rep.Lag {
					t.AppendRow(table.Row{l.Group, l.Topic, l.Partition, l.Committed, l.End, l.Lag, fmt.Sprintf("%.1f", l.LagSeconds), l.Member})
				}
			})
		},
	}
	cmd.Flags().StringSliceVar(&groups, "groups", defaultGroups, "consumer groups to report (the topic prefix is put in front)")
	return cmd
}

// prefixed puts the deployment's topic prefix in front of group names, the
// way test and multi-tenant installations name their groups.
func prefixed(prefix string, groups []string) []string {
	out := make([]string, len(groups))
	for i, g := range groups {
		out[i] = prefix + g
	}
	return out
}

func age(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Millisecond).String() + " ago"
}

// retention says how long a topic keeps records: "7d" for 604800000 ms,
// "forever" for -1.
func retention(ms int64) string {
	if ms < 0 {
		return "forever"
	}
	d := time.Duration(ms) * time.Millisecond
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}
