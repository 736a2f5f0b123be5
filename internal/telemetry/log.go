// Package telemetry owns what every doclog role shows an operator: its zap
// logger, its Prometheus registry, and the HTTP endpoints a process serves
// beside its API — /healthz (alive), /readyz (every dependency answers) and
// /metrics.
//
// It imports neither pgx nor franz-go, so any package may use it. Collectors
// that need a driver live in sub-packages next to the driver's single
// importer (see internal/telemetry/pgxstats).
package telemetry

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults applied by LogConfig.WithDefaults.
const (
	DefaultLogLevel    = "info"
	DefaultLogEncoding = EncodingJSON
)

// Log encodings.
const (
	// EncodingJSON is one JSON object per line, what log pipelines ingest.
	EncodingJSON = "json"
	// EncodingConsole is zap's human-readable line format, for a terminal.
	EncodingConsole = "console"
)

// LogConfig configures a process's logger.
type LogConfig struct {
	// Level is the least severe level written: debug, info, warn or error.
	// Default "info".
	Level string
	// Encoding is "json" or "console". Default "json": production logs are
	// zap JSON, one object a line for a log collector to parse; `doclog dev`
	// may choose console for a terminal.
	Encoding string
	// Development turns on zap's development behaviour, for `doclog dev` and
	// tests: DPanic logs panic, and warnings carry stack traces, so a
	// programming error is loud where someone is watching. Default false.
	Development bool
	// Output receives the log lines. Default os.Stderr.
	Output io.Writer
}

// WithDefaults returns a copy with every unset field at its default.
func (c LogConfig) WithDefaults() LogConfig {
	if c.Level == "" {
		c.Level = DefaultLogLevel
	}
	if c.Encoding == "" {
		c.Encoding = DefaultLogEncoding
	}
	if c.Output == nil {
		c.Output = os.Stderr
	}
	return c
}

// Validate reports the first setting that cannot work. Call it on the result
// of WithDefaults.
func (c LogConfig) Validate() error {
	if _, err := parseLevel(c.Level); err != nil {
		return err
	}
	switch c.Encoding {
	case EncodingJSON, EncodingConsole:
	default:
		return fmt.Errorf("log encoding %q is not one of json, console", c.Encoding)
	}
	if c.Output == nil {
		return errors.New("log output must not be nil")
	}
	return nil
}

func parseLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("log level %q is not one of debug, info, warn, error", s)
}

// NewLogger builds the process logger. Field names follow zap's production
// encoder (ts, level, msg, caller, logger) with ISO-8601 timestamps, so logs
// from every role share one shape; callers add job and document ids as
// fields ("jobId", "documentId").
func NewLogger(cfg LogConfig) (*zap.Logger, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuring the logger: %w", err)
	}
	level, _ := parseLevel(cfg.Level)

	// One set of keys in every mode, so a log query written against
	// production output also works on `doclog dev`'s.
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.TimeKey = "ts"
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	encCfg.EncodeDuration = zapcore.StringDurationEncoder

	var enc zapcore.Encoder
	if cfg.Encoding == EncodingConsole {
		enc = zapcore.NewConsoleEncoder(encCfg)
	} else {
		enc = zapcore.NewJSONEncoder(encCfg)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(cfg.Output)), zap.NewAtomicLevelAt(level))

	opts := []zap.Option{zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel)}
	if cfg.Development {
		opts = []zap.Option{zap.AddCaller(), zap.AddStacktrace(zapcore.WarnLevel), zap.Development()}
	}
	return zap.New(core, opts...), nil
}
