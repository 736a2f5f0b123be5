package ctlcli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/kafka"
)

func newDLQCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "dlq", Short: "List, inspect, redrive and purge dead letters"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the dead letters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			entries, err := admin.ListDeadLetters(ctx, g.kafka(), g.topics().DeadLetters)
			if err != nil {
				return err
			}
			return g.render(entries, func(t table.Writer) {
				t.AppendHeader(table.Row{"ref", "job", "document", "error type", "error", "attempts", "failed at"})
				for _, e := range entries {
					if e.DeadLetter == nil {
						t.AppendRow(table.Row{e.Ref(), "", "", "", "not a dead letter: " + e.DecodeError, "", ""})
						continue
					}
					dl := e.DeadLetter
					job, doc := "(undecodable)", dl.Source.Key
					if dl.Job != nil {
						job, doc = dl.Job.JobID, dl.Job.DocumentID
					}
					t.AppendRow(table.Row{e.Ref(), job, doc, dl.ErrorType, abbreviate(dl.Error.Error(), 60), dl.Attempts, dl.FailedAt.Format(time.RFC3339)})
				}
			})
		},
	}
	show := &cobra.Command{
		Use:   "show PARTITION:OFFSET",
		Short: "Show one dead letter in full (JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := g.findDeadLetter(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			g.output = "json"
			return g.render(e, nil)
		},
	}
	var all bool
	redrive := &cobra.Command{
		Use:   "redrive [PARTITION:OFFSET...]",
		Short: "Submit dead-lettered jobs again, each as a new job (new id)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return usagef("name dead letters as PARTITION:OFFSET, or pass --all")
			}
			if err := checkRefs(args); err != nil {
				return err
			}
			ctx, cancel := g.withTimeout(cmd.Context())
			defer cancel()
			entries, err := admin.ListDeadLetters(ctx, g.kafka(), g.topics().DeadLetters)
			if err != nil {
				return err
			}
			if !all {
				if entries, err = pick(entries, args); err != nil {
					return err
				}
			}
			cl, err := kafka.NewClient(g.kafka(), nil)
			if err != nil {
				return err
			}
			defer cl.Close()
			type row struct {
				Ref      string `json:"ref"`
				OldJobID string `json:"oldJobId,omitempty"`
				NewJobID string `json:"newJobId,omitempty"`
				Error    string `json:"error,omitempty"`
			}
			var rows []row
			failed := false
			for _, e := range entries {
				r := row{Ref: e.Ref()}
				if e.DeadLetter != nil && e.DeadLetter.Job != nil {
					r.OldJobID = e.DeadLetter.Job.JobID
				}
				if r.NewJobID, err = admin.RedriveDeadLetter(ctx, cl, g.topics().Jobs, e, time.Now()); err != nil {
					r.Error, failed = err.Error(), true
				}
				rows = append(rows, r)
			}
			if err := g.render(rows, func(t table.Writer) {
				t.AppendHeader(table.Row{"ref", "old job", "new job", "error"})
				for _, r := range rows {
					t.AppendRow(table.Row{r.Ref, r.OldJobID, r.NewJobID, r.Error})
				}
			}); err != nil {
				return err
			}
			if failed {
				return errProblemsFound
			}
			return nil
		},
	}
	redrive.Flags().BoolVar(&all, "all", false, "redrive every dead letter")
	var yes bool
	purge := &cobra.Command{
		Use:   "purge --yes",
		Short: "Delete every dead letter written so far",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return usagef("purge deletes dead letters for good: pass --yes")
			}
			return g.withKafka(cmd.Context(), func(ctx context.Context, cl *kgo.Client) error {
				n, err := admin.PurgeDeadLetters(ctx, kadm.NewClient(cl), g.topics().DeadLetters)
				if err != nil {
					return err
				}
				return g.render(map[string]int64{"purged": n}, func(t table.Writer) {
					t.AppendHeader(table.Row{"purged"})
					t.AppendRow(table.Row{n})
				})
			})
		},
	}
	purge.Flags().BoolVar(&yes, "yes", false, "confirm the purge")
	cmd.AddCommand(list, show, redrive, purge)
	return cmd
}

func (g *globals) topics() kafka.Topics { return kafka.TopicNames(g.topicPrefix) }

func (g *globals) findDeadLetter(ctx context.Context, ref string) (admin.DeadLetterEntry, error) {
	if err := checkRefs([]string{ref}); err != nil {
		return admin.DeadLetterEntry{}, err
	}
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	entries, err := admin.ListDeadLetters(ctx, g.kafka(), g.topics().DeadLetters)
	if err != nil {
		return admin.DeadLetterEntry{}, err
	}
	found, err := pick(entries, []string{ref})
	if err != nil {
		return admin.DeadLetterEntry{}, err
	}
	return found[0], nil
}

// pick selects entries by PARTITION:OFFSET.
func pick(entries []admin.DeadLetterEntry, refs []string) ([]admin.DeadLetterEntry, error) {
	byRef := make(map[string]admin.DeadLetterEntry, len(entries))
	for _, e := range entries {
		byRef[e.Ref()] = e
	}
	if err := checkRefs(refs); err != nil {
		return nil, err
	}
	out := make([]admin.DeadLetterEntry, 0, len(refs))
	for _, ref := range refs {
		e, found := byRef[ref]
		if !found {
			return nil, fmt.Errorf("no dead letter at %s", ref)
		}
		out = append(out, e)
	}
	return out, nil
}

// checkRefs refuses, as a usage error, a reference that is not
// PARTITION:OFFSET, before anything is read.
func checkRefs(refs []string) error {
	for _, ref := range refs {
		p, o, ok := strings.Cut(ref, ":")
		_, perr := strconv.ParseInt(p, 10, 32)
		_, oerr := strconv.ParseInt(o, 10, 64)
		if !ok || perr != nil || oerr != nil {
			return usagef("%q is not PARTITION:OFFSET", ref)
		}
	}
	return nil
}
