// Package servicecli is the command tree of the doclog service: serve, dev
// and migrate. cmd/doclog runs it whole; a projector's worker binary
// (package worker) takes serve and migrate from it with defaults of its
// own, so both binaries read the same flags, DOCLOG_* variables and config
// file, the same way.
package servicecli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
	"github.com/doclog/doclog/internal/gcpercent"
	"github.com/doclog/doclog/internal/telemetry"
)

// ServeOptions are what differs in a serve command of another binary.
type ServeOptions struct {
	// Short is the command's one-line help. Default doclog serve's.
	Short string
	// Flags are the flags' defaults that differ (app.FlagDefaults).
	Flags app.FlagDefaults
	// Name is the binary's name in its log lines. Default "doclog".
	Name string
}

func newServeCmd(out io.Writer) *cobra.Command { return NewServeCmd(out, ServeOptions{}) }

// NewServeCmd is doclog serve: every flag of app.Settings, DOCLOG_*
// variables and the --config file, with opts' defaults.
func NewServeCmd(_ io.Writer, opts ServeOptions) *cobra.Command {
	if opts.Short == "" {
		opts.Short = "Run the given roles against external Postgres, Kafka and (optionally) ClickHouse"
	}
	if opts.Name == "" {
		opts.Name = "doclog"
	}
	s := &app.Settings{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: opts.Short,
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
			applyGCPercent(cmd, s, logger)
			a, err := app.New(cmd.Context(), s, logger)
			if err != nil {
				return err
			}
			return a.Run(cmd.Context(), func() {
				logger.Info(opts.Name+" serving", zap.Strings("roles", s.Roles), zap.Strings("projectors", s.Projectors), zap.String("ops", a.Addr("ops")),
					zap.String("ingest", a.Addr(app.RoleIngest)), zap.String("readstore", a.Addr(app.RoleReadstore)))
			})
		},
	}
	app.BindFlagsWith(cmd.Flags(), s, opts.Flags)
	bindConfigFlag(cmd.Flags())
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
// CLICKHOUSE_URL) into the flags not given, then the config file --config
// or DOCLOG_CONFIG names into those still unset. It runs once per command:
// a secret read from its file counts as given.
func fromEnv(cmd *cobra.Command, _ *app.Settings) error {
	fs := cmd.Flags()
	if err := connflags.ApplyEnv(fs, nil); err != nil {
		return err
	}
	path := config.FilePath(fs, nil, "")
	if path == "" {
		return nil
	}
	f, err := config.ReadFile(path, false)
	if err != nil {
		return err
	}
	// doclog reads the top level only: the contexts are doclogctl's.
	return f.Apply(fs, "", nil)
}

// bindConfigFlag declares --config, the config file of serve and dev.
func bindConfigFlag(fs *pflag.FlagSet) {
	fs.String(config.FileFlag, "", "YAML file of settings, keyed by flag name (a flag or variable wins over it); unknown keys are an error")
}

func validate(s *app.Settings) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	return nil
}

// applyGCPercent sets the process's collector target from the settings
// (gcpercent.Apply: an explicit --gc-percent, else GOGC, else the default)
// and logs what is in effect.
func applyGCPercent(cmd *cobra.Command, s *app.Settings, logger *zap.Logger) {
	n, src := gcpercent.Apply(s.GCPercent, cmd.Flags().Changed("gc-percent"))
	logger.Info("garbage collector target", zap.Int("gc_percent", n), zap.String("from", string(src)))
}

func newLogger(s *app.Settings) (*zap.Logger, error) {
	return telemetry.NewLogger(telemetry.LogConfig{Level: s.LogLevel, Encoding: s.LogEncoding})
}
