package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/log/postgres"
)

// executorGroup is the executor consumer group under the topic prefix, as
// doclog serve names it, unless --group says otherwise.
func (g *globals) executorGroup(flag string) string {
	if flag != "" {
		return flag
	}
	return g.topicPrefix + executor.DefaultGroup
}

func newJobsListCmd(g *globals) *cobra.Command {
	var (
		partition int32
		document  string
		parked    bool
		group     string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the jobs still waiting for the executor group (pending, or parked on a dependency)",
		Long: `List the jobs still waiting for the executor group: the records of the jobs
topic at or beyond the group's committed offset on each partition that have no
result in the log yet, oldest first per partition.

WAITS FOR names the queueHint jobs a job is parked on (they have no result
yet), or the earlier job of the same document it waits behind. Only what the
log and the topic show is reported: a member's backoff after a transient
error, or its wait for a model it does not know, lives in that member's
memory and shows here as a plain pending job.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var f admin.QueueFilter
			if cmd.Flags().Changed("partition") {
				if partition < 0 {
					return usagef("--partition must be 0 or more, not %d", partition)
				}
				f.Partition = &partition
			}
			f.DocumentID, f.Parked = document, parked
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				jobs, err := admin.QueuedJobs(ctx, g.kafka(), s, g.topics().Jobs, g.executorGroup(group), f, time.Now())
				if err != nil {
					return err
				}
				return g.render(jobs, func(t table.Writer) {
					t.AppendHeader(table.Row{"job", "document", "partition", "offset", "age", "waits for"})
					for _, q := range jobs {
						waits := strings.Join(q.WaitsFor, " ")
						if q.Behind != "" {
							waits = "behind " + q.Behind
						}
						if q.DecodeError != "" {
							waits = "undecodable (dead-lettered next): " + abbreviate(q.DecodeError, 60)
						}
						t.AppendRow(table.Row{q.JobID, q.DocumentID, q.Partition, q.Offset,
							time.Duration(q.AgeSeconds * float64(time.Second)).Round(time.Second), waits})
					}
				})
			})
		},
	}
	fl := cmd.Flags()
	fl.Int32Var(&partition, "partition", 0, "list only this partition of the jobs topic")
	fl.StringVar(&document, "document", "", "list only this document's jobs")
	fl.BoolVar(&parked, "parked", false, "list only the jobs parked on a dependency (and those behind them)")
	fl.StringVar(&group, "group", "", "the executor consumer group (default: the topics prefix + doclog-executor)")
	return cmd
}

func newJobsCancelCmd(g *globals) *cobra.Command {
	var (
		partition int32
		reason    string
		group     string
	)
	cmd := &cobra.Command{
		Use:   "cancel JOB_ID",
		Short: "Cancel a queued job: it ends FAILED (Cancelled) and nothing of it is applied",
		Long: `Cancel a job the executor has not settled yet: its result is written as
FAILED with the error name Cancelled, under the rule every job result obeys
(a job is settled once; the first settle wins). When the executor reaches the
job it finds that result, applies nothing and dead-letters the job
(errorType CANCELLED); jobs that name it in their queueHint fail with
DEPENDENCY_FAILED.

A job that has a result already (WRITE_READY, or FAILED) cannot be
cancelled: the command prints its status and exits 1. So does a job whose
record is not waiting on the jobs topic (never submitted, or expired). When
the executor settles the job at the same moment, whichever write comes first
stands, and the command reports which.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if u, err := uuid.Parse(id); err != nil || u.String() != id {
				return usagef("%q is not a job id: a job id is a UUID in canonical lowercase form", id)
			}
			var p *int32
			if cmd.Flags().Changed("partition") {
				if partition < 0 {
					return usagef("--partition must be 0 or more, not %d", partition)
				}
				p = &partition
			}
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				res, err := admin.CancelJob(ctx, g.kafka(), s, g.topics().Jobs, g.executorGroup(group), id, reason, p, time.Now())
				if err != nil {
					return err
				}
				r := res.Result
				if err := g.render(res, func(t table.Writer) {
					t.AppendHeader(table.Row{"job", "document", "status", "cancelled", "error"})
					var failure string
					if n := len(r.ErrorHistory); n > 0 {
						failure = r.ErrorHistory[n-1].Error()
					}
					t.AppendRow(table.Row{r.JobID, r.DocumentID, r.Status, res.Cancelled, failure})
				}); err != nil {
					return err
				}
				if !res.Cancelled {
					return fmt.Errorf("job %s cannot be cancelled: it is already %s", id, r.Status)
				}
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.Int32Var(&partition, "partition", 0, "look for the job's record only on this partition of the jobs topic")
	fl.StringVar(&reason, "reason", "", "why, kept in the job's error message")
	fl.StringVar(&group, "group", "", "the executor consumer group (default: the topics prefix + doclog-executor)")
	return cmd
}
