package ctlcli

import (
	"context"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/kafka"
)

func newTopicsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "topics", Short: "Create and describe doclog's Kafka topics"}
	var tc kafka.TopicsConfig
	var partitions int32
	var replication int16
	create := &cobra.Command{
		Use:   "create",
		Short: "Create the jobs, write-ready and dead-letter topics (idempotent; refuses a partition mismatch)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withKafka(cmd.Context(), func(ctx context.Context, cl *kgo.Client) error {
				tc.Prefix, tc.JobsPartitions, tc.ReplicationFactor = g.topicPrefix, partitions, replication
				states, err := kafka.EnsureTopics(ctx, cl, tc)
				if err != nil {
					return err
				}
				type row struct {
					Topic      string `json:"topic"`
					Partitions int32  `json:"partitions"`
					Created    bool   `json:"created"`
				}
				rows := make([]row, len(states))
				for i, s := range states {
					rows[i] = row{Topic: s.Spec.Name, Partitions: s.Partitions, Created: s.Created}
				}
				return g.render(rows, func(t table.Writer) {
					t.AppendHeader(table.Row{"topic", "partitions", "created"})
					for _, r := range rows {
						t.AppendRow(table.Row{r.Topic, r.Partitions, r.Created})
					}
				})
			})
		},
	}
	create.Flags().Int32Var(&partitions, "partitions", kafka.DefaultJobsPartitions, "partitions of the jobs and write-ready topics (fixed for the topics' life)")
	create.Flags().Int16Var(&replication, "replication-factor", 0, "replication factor (default 3, or the broker count when smaller)")

	describe := &cobra.Command{
		Use:   "describe",
		Short: "Show each topic's partitions, end offsets and settings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withKafka(cmd.Context(), func(ctx context.Context, cl *kgo.Client) error {
				rows, err := admin.DescribeTopics(ctx, kadm.NewClient(cl), kafka.TopicNames(g.topicPrefix).All()...)
				if err != nil {
					return err
				}
				return g.render(rows, func(t table.Writer) {
					t.AppendHeader(table.Row{"topic", "exists", "partitions", "replicas", "end offsets", "retention.ms", "min.insync.replicas"})
					for _, r := range rows {
						t.AppendRow(table.Row{r.Topic, r.Exists, r.Partitions, r.Replication, r.EndOffsetSum, r.Configs["retention.ms"], r.Configs["min.insync.replicas"]})
					}
				})
			})
		},
	}
	cmd.AddCommand(create, describe)
	return cmd
}

func (g *globals) withKafka(ctx context.Context, fn func(context.Context, *kgo.Client) error) error {
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	cfg := g.kafka()
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	cl, err := kafka.NewClient(cfg, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, cl)
}
