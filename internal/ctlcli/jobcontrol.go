package ctlcli

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

// pauseTarget reads --partition or --type, exactly one of them.
func pauseTarget(cmd *cobra.Command, partition int32, docType string) (string, error) {
	byPart, byType := cmd.Flags().Changed("partition"), cmd.Flags().Changed("type")
	switch {
	case byPart == byType:
		return "", usagef("name exactly one of --partition and --type")
	case byPart && partition < 0:
		return "", usagef("--partition must be 0 or more, not %d", partition)
	case byPart:
		return executor.PartitionTarget(partition), nil
	case docType == "":
		return "", usagef("--type must name a document type")
	}
	return executor.TypeTarget(docType), nil
}

func newJobsPauseCmds(g *globals) []*cobra.Command {
	var (
		partition      int32
		docType, why   string
		rPart          int32
		rType          string
		pauseCmd, resC *cobra.Command
	)
	pauseCmd = &cobra.Command{
		Use:   "pause (--partition N | --type T) [--reason R]",
		Short: "Pause a partition of the jobs topic or a document type on the whole executor group",
		Long: `Pause a partition of the jobs topic or a document type on the whole executor
group. The pause is stored in the log's database, so it holds across member
restarts and rebalances; every member reads the pauses before its first batch
and every 2 seconds. A paused job is not applied and stays queued in its place
(the group's offset stops before it, its document's later jobs wait behind it);
jobs pause takes effect within those 2 seconds and the batch under way.
jobs resume lifts it; the jobs then run in order. Pausing what is paused
already changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := pauseTarget(cmd, partition, docType)
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				added, err := s.PauseExecutorIfAbsent(ctx, target, why)
				if err != nil {
					return err
				}
				if added {
					fmt.Fprintf(g.out, "paused %s\n", target)
				} else {
					fmt.Fprintf(g.out, "%s was paused already\n", target)
				}
				return nil
			})
		},
	}
	pauseCmd.Flags().Int32Var(&partition, "partition", 0, "the partition of the jobs topic to pause")
	pauseCmd.Flags().StringVar(&docType, "type", "", "the document type to pause, e.g. doclog/json")
	pauseCmd.Flags().StringVar(&why, "reason", "", "why, shown by jobs pauses")

	resC = &cobra.Command{
		Use:   "resume (--partition N | --type T)",
		Short: "Lift a pause set with jobs pause (exit 1 when there was none)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := pauseTarget(cmd, rPart, rType)
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				lifted, err := s.ResumeExecutor(ctx, target)
				if err != nil {
					return err
				}
				if !lifted {
					return fmt.Errorf("%s is not paused", target)
				}
				fmt.Fprintf(g.out, "resumed %s\n", target)
				return nil
			})
		},
	}
	resC.Flags().Int32Var(&rPart, "partition", 0, "the partition of the jobs topic to resume")
	resC.Flags().StringVar(&rType, "type", "", "the document type to resume")

	list := &cobra.Command{
		Use:   "pauses",
		Short: "List the pauses in force on the executor group",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				ps, err := s.ExecutorPauses(ctx)
				if err != nil {
					return err
				}
				return g.render(ps, func(t table.Writer) {
					t.AppendHeader(table.Row{"paused", "since", "reason"})
					for _, p := range ps {
						t.AppendRow(table.Row{p.Target, p.PausedAt.UTC().Format(time.RFC3339), p.Reason})
					}
				})
			})
		},
	}
	return []*cobra.Command{pauseCmd, resC, list}
}
