package main

import (
	"context"
	"fmt"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
)

func newJobsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Look up and submit jobs"}
	cmd.AddCommand(&cobra.Command{
		Use:   "get JOB_ID...",
		Short: "Show the stored results of jobs (PENDING when a job has none yet)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				found, err := s.JobResults(ctx, args)
				if err != nil {
					return err
				}
				out := make([]oplog.JobResult, len(args))
				for i, id := range args {
					r, ok := found[id]
					if !ok {
						r = oplog.JobResult{JobID: id, Status: oplog.JobPending}
					}
					out[i] = r
				}
				return g.render(out, func(t table.Writer) {
					t.AppendHeader(table.Row{"job", "status", "document", "written", "error"})
					for _, r := range out {
						var written, failure string
						for _, rg := range r.Streams {
							written += fmt.Sprintf("%s %d..%d ", rg.Stream.Scope, rg.FromIndex, rg.ToIndex)
						}
						if n := len(r.ErrorHistory); n > 0 {
							failure = r.ErrorHistory[n-1].Error()
						}
						t.AppendRow(table.Row{r.JobID, r.Status, r.DocumentID, written, failure})
					}
				})
			})
		},
	})
	return cmd
}
