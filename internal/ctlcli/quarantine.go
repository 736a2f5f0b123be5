package ctlcli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/catalog"
)

// liftOutcome is one stream's lift, as `docs quarantine lift` reports it.
type liftOutcome struct {
	admin.QuarantinedStream
	// Lifted is true when the quarantine is gone and the stream caught up;
	// Already when something else lifted it first (the reconciler, for a
	// model it learned; another operator).
	Lifted    bool  `json:"lifted"`
	Already   bool  `json:"already,omitempty"`
	Replayed  int   `json:"replayed"`
	LastIndex int64 `json:"lastIndex"`
	// Refused is the finding that kept the quarantine: where a replay of
	// the stream from the log fails now.
	Refused *admin.QuarantinedStream `json:"refused,omitempty"`
}

// newQuarantineCmd is `docs quarantine list|lift`; the branch comes from
// the docs command's --branch.
func newQuarantineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "quarantine", Short: "Streams a projector stopped applying, and lifting them once they verify"}
	var projector string
	all := g.projectorNames()
	cmd.PersistentFlags().StringVar(&projector, "projector", "", "only this projector's quarantines ("+strings.Join(all, ", ")+"); default all")
	names := func() ([]string, error) {
		if projector == "" {
			return all, nil
		}
		if _, err := catalog.Lookup(projector); err != nil || !slices.Contains(all, projector) {
			return nil, usagef("--projector takes %s, not %q", strings.Join(all, ", "), projector)
		}
		return []string{projector}, nil
	}

	list := &cobra.Command{
		Use:   "list",
		Short: "The quarantined streams of every projector: where each stopped, since when and why",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := names()
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				qs, err := admin.ListQuarantines(ctx, s, ps)
				if err != nil {
					return err
				}
				if cmd.Flags().Changed("branch") {
					branch, _ := cmd.Flags().GetString("branch")
					qs = slices.DeleteFunc(qs, func(q admin.QuarantinedStream) bool { return q.Branch != branch })
				}
				return g.render(qs, func(t table.Writer) {
					t.AppendHeader(table.Row{"projector", "document", "scope", "branch", "since", "index", "error", "reason"})
					for _, q := range qs {
						t.AppendRow(table.Row{q.Projector, q.DocumentID, q.Scope, q.Branch, q.Since.Format(time.RFC3339), q.Index, q.ErrorName, abbreviate(q.Reason, 60)})
					}
				})
			})
		},
	}

	var scope string
	lift := &cobra.Command{
		Use:     "lift DOCUMENT_ID",
		Aliases: []string{"release"},
		Short:   "Re-verify a document's quarantined streams from the log and apply what waited (exit 3 when one still does not verify)",
		Long: `Lift replays each quarantined stream of the document (on --branch; only
--scope and --projector when given) from index 0 of the operation log, with
every hash checked, and hands the result to the projector, in one
transaction holding the stream's lock: the operations that waited behind
the quarantine are applied, and the stream moves with new records again.
A stream that still does not verify stays quarantined, and the finding is
reported (exit 3). Lifting an analytics quarantine writes to ClickHouse:
it needs --clickhouse-url (or the context's clickhouse-url).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ps, err := names()
			if err != nil {
				return err
			}
			branch, _ := cmd.Flags().GetString("branch")
			clickhouseURL := g.ClickHouseURL
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				all, err := admin.ListQuarantines(ctx, s, ps)
				if err != nil {
					return err
				}
				qs := slices.DeleteFunc(all, func(q admin.QuarantinedStream) bool {
					return q.DocumentID != args[0] || q.Branch != branch || (scope != "" && q.Scope != scope)
				})
				if len(qs) == 0 {
					return fmt.Errorf("document %s has no quarantined stream on branch %s%s (doclogctl docs quarantine list shows them all)",
						args[0], branch, liftFilter(projector, scope))
				}
				reg, err := g.registry()
				if err != nil {
					return err
				}
				out := make([]liftOutcome, 0, len(qs))
				refused := false
				for _, q := range qs {
					p, closeP, err := openProjector(ctx, q.Projector, clickhouseURL, "lifting an analytics quarantine")
					if err != nil {
						return err
					}
					rep, err := admin.LiftQuarantine(ctx, s, reg, p, q.Stream())
					closeP()
					o := liftOutcome{QuarantinedStream: q, LastIndex: rep.LastIndex}
					var re *projectors.LiftRefusedError
					switch {
					case errors.As(err, &re):
						refused = true
						f := q
						f.Index, f.ErrorName, f.Reason, f.Since = re.Finding.Index, re.Finding.ErrorName, re.Finding.Reason, time.Time{}
						o.Refused = &f
					case errors.Is(err, projectors.ErrNotQuarantined):
						// Lifted meanwhile (the reconciler releases a model
						// it learned): nothing left to do.
						o.Lifted, o.Already = true, true
					case err != nil:
						return fmt.Errorf("lift %s of projector %s: %w", q.Stream(), q.Projector, err)
					default:
						o.Lifted, o.Replayed = true, rep.Replayed
					}
					out = append(out, o)
				}
				err = g.render(out, func(t table.Writer) {
					t.AppendHeader(table.Row{"projector", "stream", "quarantined at", "outcome"})
					for _, o := range out {
						outcome := fmt.Sprintf("lifted: %d operation(s) replayed and verified, now at index %d", o.Replayed, o.LastIndex)
						switch {
						case o.Already:
							outcome = "lifted already, by the reconciler or another operator"
						case o.Refused != nil:
							outcome = fmt.Sprintf("refused: the log still fails at index %d: %s: %s", o.Refused.Index, o.Refused.ErrorName, abbreviate(o.Refused.Reason, 80))
						}
						t.AppendRow(table.Row{o.Projector, o.Stream().String(), o.Index, outcome})
					}
				})
				if err == nil && refused {
					return errProblemsFound
				}
				return err
			})
		},
	}
	lift.Flags().StringVar(&scope, "scope", "", "only the stream of this scope; default every quarantined scope of the document")
	cmd.AddCommand(list, lift)
	return cmd
}

func liftFilter(projector, scope string) string {
	var parts []string
	if scope != "" {
		parts = append(parts, "scope "+scope)
	}
	if projector != "" {
		parts = append(parts, "projector "+projector)
	}
	if len(parts) == 0 {
		return ""
	}
	return " for " + strings.Join(parts, " and ")
}

// openProjector returns the projector named, whose tables a lift or a
// rebuild writes, and what closes it; what needs it is said in usage
// errors.
func openProjector(ctx context.Context, name, clickhouseURL, what string) (projectors.Projector, func(), error) {
	spec, err := catalog.Lookup(name)
	if err != nil {
		return nil, nil, usageError{err}
	}
	var o catalog.Options
	if spec.ClickHouse {
		if clickhouseURL == "" {
			return nil, nil, usagef("%s writes to ClickHouse: set --clickhouse-url, DOCLOG_CLICKHOUSE_URL or CLICKHOUSE_URL, or add clickhouse-url to a context", what)
		}
		if o.ClickHouse, err = analytics.ParseURL(clickhouseURL); err != nil {
			return nil, nil, usageError{err}
		}
	}
	return spec.Open(ctx, o)
}
