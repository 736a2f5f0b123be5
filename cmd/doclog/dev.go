package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/app"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/localpg"
)

func newDevCmd(out io.Writer) *cobra.Command {
	s := &app.Settings{}
	var dataDir string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run every role in one process with an in-process Kafka and a local Postgres",
		Long: `Run every role in one process: an in-process Kafka (franz-go's kfake), a local
Postgres that doclog initialises and starts itself unless DATABASE_URL is set,
and ClickHouse analytics when CLICKHOUSE_URL is set. With --data-dir the
Postgres cluster and the Kafka log persist there between runs; without it both
live in a temporary directory removed at exit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := config.ApplyEnv(cmd.Flags(), nil); err != nil {
				return err
			}
			persistent := dataDir != ""
			if !persistent {
				tmp, err := os.MkdirTemp("", "doclog-dev-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dataDir = tmp
			}
			if err := reachable(dataDir); err != nil {
				return err
			}

			if s.DatabaseURL == "" {
				s.DatabaseURL = os.Getenv("DATABASE_URL")
			}
			if s.DatabaseURL == "" {
				pg, err := localpg.Start(ctx, localpg.Config{DataDir: filepath.Join(dataDir, "pg")})
				if err != nil {
					return err
				}
				defer func() { _ = pg.Stop(context.WithoutCancel(ctx)) }()
				s.DatabaseURL = pg.URL()
			}

			kopts := []kfake.Opt{kfake.NumBrokers(1), kfake.DefaultNumPartitions(int(s.Topics.JobsPartitions))}
			if persistent {
				kopts = append(kopts, kfake.DataDir(filepath.Join(dataDir, "kafka")))
			}
			cluster, err := kfake.NewCluster(kopts...)
			if err != nil {
				return fmt.Errorf("starting the in-process Kafka: %w", err)
			}
			defer cluster.Close()
			s.Kafka.Seeds = cluster.ListenAddrs()
			s.Topics.ReplicationFactor, s.Topics.MinInsyncReplicas = 1, 1

			if err := resolve(cmd, s); err != nil {
				return err
			}
			logger, err := newLogger(s)
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			a, err := app.New(ctx, s, logger)
			if err != nil {
				return err
			}
			return a.Run(ctx, func() {
				ingestURL := "http://" + localAddr(a.Addr(app.RoleIngest))
				fmt.Fprintf(out, "doclog dev is running (data in %s)\n", dataDir)
				fmt.Fprintf(out, "  ingest     %s\n", ingestURL)
				if addr := a.Addr(app.RoleReadstore); addr != "" {
					fmt.Fprintf(out, "  readstore  http://%s\n", localAddr(addr))
				}
				fmt.Fprintf(out, "  ops        http://%s  (/metrics, /readyz, /healthz)\n", localAddr(a.Addr("ops")))
				fmt.Fprintf(out, "  postgres   %s\n", s.DatabaseURL)
				fmt.Fprintf(out, "  kafka      %s (in-process)\n", strings.Join(s.Kafka.Seeds, ","))
				fmt.Fprintf(out, "Try:\n  curl -s -X POST %s/v1/documents -H 'Content-Type: application/json' -d '{\"documentType\":\"doclog/json\",\"name\":\"hello\"}'\n", ingestURL)
				fmt.Fprintf(out, "then follow the statusUrl it returns with ?wait=5s. Ctrl-C stops doclog.\n")
				logger.Info("doclog dev ready", zap.String("ingest", ingestURL))
			})
		},
	}
	app.BindFlags(cmd.Flags(), s)
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep Postgres and Kafka data here between runs (default: a temporary directory)")
	// Development defaults: everything migrates itself, logs read well in a
	// terminal, and a few partitions are plenty on one machine.
	_ = cmd.Flags().Set("migrate", "auto")
	_ = cmd.Flags().Set("log-encoding", "console")
	_ = cmd.Flags().Set("topics-jobs-partitions", "4")
	for _, name := range []string{"migrate", "log-encoding", "topics-jobs-partitions"} {
		f := cmd.Flags().Lookup(name)
		f.DefValue, f.Changed = f.Value.String(), false
	}
	config.AnnotateUsage(cmd.Flags())
	return cmd
}

// reachable makes dir and its parents traversable, so the postgres user can
// reach a cluster a root process creates under it.
func reachable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("creating the data directory %s: %w", abs, err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	for d := abs; d != filepath.Dir(d); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				return fmt.Errorf("making %s traversable for the postgres user: %w", d, err)
			}
		}
	}
	return nil
}

// localAddr turns ":8080" or "[::]:8080" into "127.0.0.1:8080" for printing.
func localAddr(addr string) string {
	if i := strings.LastIndex(addr, ":"); i >= 0 {
		host := addr[:i]
		if host == "" || host == "[::]" || host == "0.0.0.0" {
			return "127.0.0.1" + addr[i:]
		}
	}
	return addr
}
