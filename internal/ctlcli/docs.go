package ctlcli

import (
	"context"
	"fmt"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/admin"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/pgproj"
)

func newDocsCmd(g *globals) *cobra.Command {
	var branch string
	cmd := &cobra.Command{Use: "docs", Short: "Inspect, validate and repair documents in the operation log"}
	cmd.PersistentFlags().StringVar(&branch, "branch", oplog.DefaultBranch, "branch of the document")

	get := &cobra.Command{
		Use:   "get DOCUMENT_ID",
		Short: "Rebuild a document from the log (replaying proves every stored hash)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				reg, err := g.registry()
				if err != nil {
					return err
				}
				doc, err := admin.GetDocument(ctx, s, reg, args[0], branch)
				if err != nil {
					return err
				}
				return g.render(doc, func(t table.Writer) {
					t.AppendHeader(table.Row{"scope", "revision", "version", "hash", "state"})
					for _, scope := range []string{oplog.ScopeDocument, oplog.ScopeGlobal, oplog.ScopeLocal} {
						if st, ok := doc.Scopes[scope]; ok {
							t.AppendRow(table.Row{scope, st.Revision, st.Version, st.Hash, abbreviate(string(st.State), 80)})
						}
					}
					t.SetTitle(fmt.Sprintf("%s (%s) %q deleted=%v", doc.ID, doc.DocumentType, doc.Name, doc.IsDeleted))
				})
			})
		},
	}

	var scope string
	var since int64
	var limit int
	ops := &cobra.Command{
		Use:   "ops DOCUMENT_ID",
		Short: "List a stream's operations from an index",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				// As the read store's /operations: a document with no
				// operation on the branch is not found; a stream of one that
				// has none is empty.
				revs, err := s.Revisions(ctx, args[0], branch)
				if err != nil {
					return fmt.Errorf("reading document %s: %w", args[0], err)
				}
				if len(revs.Revision) == 0 {
					return fmt.Errorf("reading the operations of %s on %s: %w", args[0], branch, admin.ErrDocumentNotFound)
				}
				k := oplog.StreamKey{DocumentID: args[0], Scope: scope, Branch: branch}
				list, err := s.ReadStream(ctx, k, since, limit)
				if err != nil {
					return err
				}
				if list == nil {
					list = []oplog.Operation{}
				}
				return g.render(list, func(t table.Writer) {
					t.AppendHeader(table.Row{"index", "skip", "action", "job", "timestamp", "version", "hash"})
					for _, op := range list {
						t.AppendRow(table.Row{op.Index, op.Skip, op.Action.Type, op.JobID,
							time.UnixMilli(op.TimestampUtcMs).UTC().Format(time.RFC3339), op.Version, op.Hash})
					}
				})
			})
		},
	}
	ops.Flags().StringVar(&scope, "scope", oplog.ScopeGlobal, "scope of the stream")
	ops.Flags().Int64Var(&since, "since", 0, "first index to list")
	ops.Flags().IntVar(&limit, "limit", 100, "most operations to list (0: all)")

	var withView bool
	validate := &cobra.Command{
		Use:   "validate DOCUMENT_ID",
		Short: "Replay a document and report keyframe, hash, stream-order and document-view issues (exit 3 when any)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				reg, err := g.registry()
				if err != nil {
					return err
				}
				var snapshots admin.SnapshotSource
				if withView {
					snapshots = admin.NewViewSnapshots(docview.NewView(s.Pool(), pgproj.New(s.Pool())))
				}
				rep, err := admin.ValidateDocument(ctx, s, reg, snapshots, args[0], branch)
				if err != nil {
					return err
				}
				err = g.render(rep, func(t table.Writer) {
					t.AppendHeader(table.Row{"kind", "stream", "index", "issue"})
					for _, is := range rep.Issues {
						t.AppendRow(table.Row{is.Kind, is.Stream.String(), is.Index, is.Message})
					}
					for _, is := range rep.Notes {
						t.AppendRow(table.Row{"note: " + string(is.Kind), is.Stream.String(), is.Index, is.Message})
					}
					verdict := "consistent"
					if !rep.Consistent {
						verdict = fmt.Sprintf("%d issue(s)", len(rep.Issues))
					}
					if len(rep.Notes) > 0 {
						verdict += fmt.Sprintf(", %d note(s)", len(rep.Notes))
					}
					t.SetTitle(fmt.Sprintf("%s on %s: %d stream(s), %s", rep.DocumentID, rep.Branch, len(rep.Streams), verdict))
				})
				if err == nil && !rep.Consistent {
					return errProblemsFound
				}
				return err
			})
		},
	}

	validate.Flags().BoolVar(&withView, "docview", true, "also compare the document view's snapshots with the replay")

	var interval int
	rebuild := &cobra.Command{
		Use:   "rebuild-keyframes DOCUMENT_ID",
		Short: "Replay a document and replace its keyframes with fresh ones",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				reg, err := g.registry()
				if err != nil {
					return err
				}
				res, err := admin.RebuildKeyframes(ctx, s, reg, args[0], branch, interval)
				if err != nil {
					return err
				}
				return g.render(res, func(t table.Writer) {
					t.AppendHeader(table.Row{"stream", "deleted", "written"})
					for _, r := range res {
						t.AppendRow(table.Row{r.Stream.String(), r.Deleted, r.Written})
					}
				})
			})
		},
	}
	rebuild.Flags().IntVar(&interval, "interval", model.DefaultKeyframeInterval, fmt.Sprintf("a keyframe every this many revisions, one interval more for every %d KiB of the state (as the executor spaces them)", model.KeyframeBytes>>10))

	cmd.AddCommand(get, ops, validate, rebuild, newQuarantineCmd(g), newBranchCmd(g))
	return cmd
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
