package main

import (
	"fmt"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/internal/kafka"
	"github.com/doclog/doclog/log/postgres"
)

// defaultGroups are the consumer groups of a standard deployment.
var defaultGroups = []string{"doclog-executor", "doclog-docview", "doclog-indexer", "doclog-analytics"}

type statusReport struct {
	Brokers    []int32              `json:"brokers"`
	Topics     []topicStatus        `json:"topics"`
	Lag        []admin.PartitionLag `json:"lag"`
	Migrations struct {
		Applied int `json:"applied"`
		Known   int `json:"known"`
	} `json:"migrations"`
	Tail postgres.TailStatus `json:"tail"`
}

type topicStatus struct {
	Topic      string `json:"topic"`
	Exists     bool   `json:"exists"`
	Partitions int    `json:"partitions"`
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
			details, err := adm.ListTopics(ctx, g.topics().All()...)
			if err != nil {
				return fmt.Errorf("listing topics: %w", err)
			}
			for _, name := range g.topics().All() {
				d, ok := details[name]
				rep.Topics = append(rep.Topics, topicStatus{Topic: name, Exists: ok && d.Err == nil, Partitions: len(d.Partitions)})
			}
			if rep.Lag, err = admin.ConsumerLag(ctx, g.kafka(), prefixed(g.topicPrefix, groups)...); err != nil {
				return err
			}
			store, err := g.store(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			statuses, err := store.MigrationStatuses(ctx)
			if err != nil {
				return err
			}
			for _, st := range statuses {
				rep.Migrations.Known++
				if st.Applied() {
					rep.Migrations.Applied++
				}
			}
			if rep.Tail, err = store.TailStatus(ctx); err != nil {
				return err
			}
			return g.render(rep, func(t table.Writer) {
				t.SetTitle(fmt.Sprintf("brokers %v · migrations %d/%d · oldest transaction %s · last write %s",
					rep.Brokers, rep.Migrations.Applied, rep.Migrations.Known,
					rep.Tail.OldestTransactionAge.Round(time.Millisecond), age(rep.Tail.LastWrittenAt)))
				t.AppendHeader(table.Row{"group", "topic", "partition", "committed", "end", "lag", "lag (s)", "member"})
				for _, l := range rep.Lag {
					t.AppendRow(table.Row{l.Group, l.Topic, l.Partition, l.Committed, l.End, l.Lag, fmt.Sprintf("%.1f", l.LagSeconds), l.Member})
				}
				for _, tp := range rep.Topics {
					if !tp.Exists {
						t.AppendFooter(table.Row{"missing topic", tp.Topic})
					}
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
