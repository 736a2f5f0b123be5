package servicecli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/buildinfo"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
	"github.com/doclog/doclog/log/postgres"
)

// databaseURL resolves the Postgres URL as serve does: the flag, then
// DOCLOG_DATABASE_URL or the file DOCLOG_DATABASE_URL_FILE names, then
// DATABASE_URL, then the config file --config or DOCLOG_CONFIG names. That
// file is serve's, so its other keys are let through unused, and a key serve
// does not know either is refused.
func databaseURL(cmd *cobra.Command, flag *string) (string, error) {
	fs := cmd.Flags()
	if err := config.ApplyEnv(fs, nil); err != nil {
		return "", err
	}
	if *flag == "" {
		*flag = os.Getenv("DATABASE_URL")
	}
	if path := config.FilePath(fs, nil, ""); path != "" {
		f, err := config.ReadFile(path, false)
		if err != nil {
			return "", err
		}
		serve := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		app.BindFlags(serve, &app.Settings{})
		if err := f.Apply(fs, "", func(key string) bool { return serve.Lookup(key) != nil }); err != nil {
			return "", err
		}
	}
	if *flag == "" {
		return "", errors.New("no database: set --database-url, DOCLOG_DATABASE_URL, DOCLOG_DATABASE_URL_FILE, DATABASE_URL or database-url in the --config file")
	}
	return *flag, nil
}

// NewRootCmd is doclog's command tree: migrate, serve and dev.
func NewRootCmd(out io.Writer) *cobra.Command { return newRootCmd(out) }

func newRootCmd(out io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "doclog",
		Short:         "doclog turns document actions into a durable, verifiable operation log",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(NewMigrateCmd(out), newServeCmd(out), newDevCmd(out))
	root.SetOut(out)
	buildinfo.Install(root, nil)
	return root
}

// NewMigrateCmd is doclog migrate and migrate status: every migration set
// of admin.Migrations (the log's, the runner's and those of every projector
// in the catalog, registered ones included), with the database URL read as
// serve reads it.
func NewMigrateCmd(out io.Writer) *cobra.Command {
	var dbURL string
	var connectTimeout time.Duration
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations (safe to run from many processes at once)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, &dbURL, &connectTimeout, func(ctx context.Context, store *postgres.Store) error {
				n, err := admin.MigrateAll(ctx, store)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "applied %d migration(s)\n", n)
				return printStatus(ctx, out, store)
			})
		},
	}
	migrate.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "List migrations and whether each is applied",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, &dbURL, &connectTimeout, func(ctx context.Context, store *postgres.Store) error {
				return printStatus(ctx, out, store)
			})
		},
	})
	pf := migrate.PersistentFlags()
	pf.StringVar(&dbURL, "database-url", "", "Postgres URL (default from DOCLOG_DATABASE_URL, the file DOCLOG_DATABASE_URL_FILE names, or DATABASE_URL)")
	config.MarkSecret(pf, "database-url")
	connflags.BindConnectTimeout(pf, &connectTimeout)
	bindConfigFlag(pf)
	return migrate
}

func withStore(cmd *cobra.Command, flag *string, connectTimeout *time.Duration, fn func(context.Context, *postgres.Store) error) error {
	url, err := databaseURL(cmd, flag)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
	defer cancel()
	store, err := connflags.OpenLog(ctx, url, *connectTimeout)
	if err != nil {
		return err
	}
	defer store.Close()
	return fn(ctx, store)
}

func printStatus(ctx context.Context, out io.Writer, store *postgres.Store) error {
	statuses, err := admin.MigrationStatuses(ctx, store)
	if err != nil {
		return err
	}
	applied, known := admin.MigrationCounts(statuses)
	fmt.Fprintf(out, "migrations %d/%d applied\n", applied, known)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tVERSION\tNAME\tAPPLIED AT")
	for _, st := range statuses {
		at := "pending"
		if st.Applied() {
			at = st.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%03d\t%s\t%s\n", st.Component, st.Version, st.Name, at)
	}
	return tw.Flush()
}
