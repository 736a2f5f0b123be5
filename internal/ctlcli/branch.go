package ctlcli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/admin"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/record"
)

// newBranchCmd is docs branch: list a document's branches from the log's
// registry, and fork, promote or delete one by producing the branch job to
// the jobs topic, as ingest's branch routes do.
func newBranchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "branch", Short: "List, fork, promote and delete a document's branches"}

	var all bool
	list := &cobra.Command{
		Use:   "list DOCUMENT_ID",
		Short: "A document's branches with their tips (revision per scope) and lineage",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				infos, err := s.Branches(ctx, args[0])
				if err != nil {
					return err
				}
				infos = slices.DeleteFunc(infos, func(b oplog.BranchInfo) bool { return !all && (b.Deleted || len(b.Tips) == 0) })
				if len(infos) == 0 {
					return fmt.Errorf("listing the branches of %s: no live branch: %w", args[0], admin.ErrDocumentNotFound)
				}
				return g.render(infos, func(t table.Writer) {
					t.AppendHeader(table.Row{"branch", "tip", "base", "fork point", "deleted"})
					for _, b := range infos {
						t.AppendRow(table.Row{b.Branch, points(b.Tips), b.Base, points(b.ForkPoint), b.Deleted})
					}
				})
			})
		},
	}
	list.Flags().BoolVar(&all, "all", false, "list deleted branches too")

	var (
		docType, from, at, onto, tip, key string
		wait                              time.Duration
	)
	job := func(kind record.Kind, docID, branch string) *record.Job {
		return &record.Job{JobID: newJobID(key), Kind: kind, DocumentID: docID, DocumentType: docType, Branch: branch,
			Actions: []oplog.Action{}, SubmittedAtUtcMs: time.Now().UnixMilli()}
	}
	fork := &cobra.Command{
		Use:   "fork DOCUMENT_ID NEW_BRANCH",
		Short: "Fork a branch (--from, default main) at --at (per scope; default its tip)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			point, err := parsePoints("--at", at)
			if err != nil {
				return err
			}
			j := job(record.KindFork, args[0], from)
			j.Fork = &record.Fork{Branch: args[1], At: point}
			return g.submitJob(cmd.Context(), j, wait)
		},
	}
	fork.Flags().StringVar(&from, "from", oplog.DefaultBranch, "the branch forked")
	fork.Flags().StringVar(&at, "at", "", "fork point, scope=revision,… (a scope left out: its tip)")

	promote := &cobra.Command{
		Use:   "promote DOCUMENT_ID BRANCH --onto TARGET --expected-tip scope=revision,…",
		Short: "Make --onto equal BRANCH, if --onto is still at --expected-tip (exit 3 on BranchConflict)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("expected-tip") {
				return usagef("--expected-tip is required: the target's tip as docs branch list shows it (\"\" for an empty branch)")
			}
			expected, err := parsePoints("--expected-tip", tip)
			if err != nil {
				return err
			}
			if expected == nil {
				expected = map[string]int64{}
			}
			j := job(record.KindPromote, args[0], args[1])
			j.Promote = &record.Promote{Onto: onto, ExpectedTip: expected}
			return g.submitJob(cmd.Context(), j, wait)
		},
	}
	promote.Flags().StringVar(&onto, "onto", oplog.DefaultBranch, "the branch made equal to BRANCH")
	promote.Flags().StringVar(&tip, "expected-tip", "", "the target's tip, scope=revision,… (required)")

	del := &cobra.Command{
		Use:   "delete DOCUMENT_ID BRANCH",
		Short: "Delete a branch (never main); its operations stay in the log",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.submitJob(cmd.Context(), job(record.KindDeleteBranch, args[0], args[1]), wait)
		},
	}
	for _, c := range []*cobra.Command{fork, promote, del} {
		c.Flags().StringVar(&docType, "type", "", "the document's type, e.g. doclog/json (required)")
		c.PreRunE = func(*cobra.Command, []string) error {
			if docType == "" {
				return usagef("--type is required: the job record names the document's type")
			}
			return nil
		}
		c.Flags().StringVar(&key, "idempotency-key", "", "derive the job id from this key, so resubmitting is the same job")
		c.Flags().DurationVar(&wait, "wait", 30*time.Second, "wait this long for the job's result (0: do not wait)")
	}
	cmd.AddCommand(list, fork, promote, del)
	return cmd
}

// parsePoints reads scope=revision pairs separated by commas; "" is nil.
func parsePoints(flag, v string) (map[string]int64, error) {
	if v == "" {
		return nil, nil
	}
	out := map[string]int64{}
	for pair := range strings.SplitSeq(v, ",") {
		scope, rev, ok := strings.Cut(pair, "=")
		n, err := strconv.ParseInt(rev, 10, 64)
		if !ok || scope == "" || err != nil || n < 0 {
			return nil, usagef("%s: %q is not scope=revision (a revision is a count of operations, 0 or more)", flag, pair)
		}
		if _, dup := out[scope]; dup {
			return nil, usagef("%s: scope %s is given twice", flag, scope)
		}
		out[scope] = n
	}
	return out, nil
}

// points renders scope=revision pairs in scope order, as the flags take
// them; empty for none.
func points(m map[string]int64) string {
	parts := make([]string, 0, len(m))
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, s+"="+strconv.FormatInt(m[s], 10))
	}
	return strings.Join(parts, ",")
}
