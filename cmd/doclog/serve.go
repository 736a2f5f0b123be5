package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/app"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/telemetry"
)

func newServeCmd(out io.Writer) *cobra.Command {
	s := &app.Settings{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the given roles against external Postgres, Kafka and (optionally) ClickHouse",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolve(cmd, s); err != nil {
				return err
			}
			logger, err := newLogger(s)
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			a, err := app.New(cmd.Context(), s, logger)
			if err != nil {
				return err
			}
			return a.Run(cmd.Context(), func() {
				logger.Info("doclog serving", zap.Strings("roles", s.Roles), zap.String("ops", a.Addr("ops")),
					zap.String("ingest", a.Addr(app.RoleIngest)), zap.String("readstore", a.Addr(app.RoleReadstore)))
			})
		},
	}
	app.BindFlags(cmd.Flags(), s)
	config.AnnotateUsage(cmd.Flags())
	return cmd
}

// resolve reads the environment into the settings, then validates them.
func resolve(cmd *cobra.Command, s *app.Settings) error {
	if err := fromEnv(cmd, s); err != nil {
		return err
	}
	return validate(s)
}

// fromEnv reads DOCLOG_* (and the conventional DATABASE_URL and
// CLICKHOUSE_URL) into the flags not given. It runs once per command: a
// secret read from its file counts as given.
func fromEnv(cmd *cobra.Command, s *app.Settings) error {
	if err := config.ApplyEnv(cmd.Flags(), nil); err != nil {
		return err
	}
	if s.DatabaseURL == "" {
		s.DatabaseURL = os.Getenv("DATABASE_URL")
	}
	if s.ClickHouseURL == "" {
		s.ClickHouseURL = os.Getenv("CLICKHOUSE_URL")
	}
	return nil
}

func validate(s *app.Settings) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	return nil
}

func newLogger(s *app.Settings) (*zap.Logger, error) {
	return telemetry.NewLogger(telemetry.LogConfig{Level: s.LogLevel, Encoding: s.LogEncoding})
}
