package ctlcli

import (
	"context"
	"fmt"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/log/postgres"
)

func newMigrateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "migrate", Short: "Schema migrations of the log and every Postgres projector"}
	cmd.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Apply pending migrations (safe to run from many processes at once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				n, err := admin.MigrateAll(ctx, s)
				if err != nil {
					return err
				}
				if g.output == "table" {
					fmt.Fprintf(g.out, "applied %d migration(s)\n", n)
				}
				return g.migrationStatus(ctx, s)
			})
		},
	}, &cobra.Command{
		Use:   "status",
		Short: "List migrations and whether each is applied",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withStore(cmd.Context(), g.migrationStatus)
		},
	})
	return cmd
}

func (g *globals) withStore(ctx context.Context, fn func(context.Context, *postgres.Store) error) error {
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	s, err := g.store(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(ctx, s)
}

type migrationRow struct {
	Component string     `json:"component"`
	Version   int        `json:"version"`
	Name      string     `json:"name"`
	Applied   bool       `json:"applied"`
	AppliedAt *time.Time `json:"appliedAt,omitempty"`
}

// migrationStatus lists every Postgres migration, the log's and each
// projector set's, under the count status reports too.
func (g *globals) migrationStatus(ctx context.Context, s *postgres.Store) error {
	statuses, err := admin.MigrationStatuses(ctx, s)
	if err != nil {
		return err
	}
	rows := make([]migrationRow, len(statuses))
	for i, st := range statuses {
		rows[i] = migrationRow{Component: st.Component, Version: st.Version, Name: st.Name, Applied: st.Applied()}
		if st.Applied() {
			at := st.AppliedAt.UTC()
			rows[i].AppliedAt = &at
		}
	}
	applied, known := admin.MigrationCounts(statuses)
	return g.render(rows, func(t table.Writer) {
		t.SetTitle("migrations %d/%d applied", applied, known)
		t.AppendHeader(table.Row{"component", "version", "name", "applied at"})
		for _, r := range rows {
			at := "pending"
			if r.AppliedAt != nil {
				at = r.AppliedAt.Format(time.RFC3339)
			}
			t.AppendRow(table.Row{r.Component, fmt.Sprintf("%03d", r.Version), r.Name, at})
		}
	})
}
