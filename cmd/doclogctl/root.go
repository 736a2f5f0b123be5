package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/internal/buildinfo"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitProblems = 3
)

// usageError marks errors in flags or configuration (exit 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// problemsFound marks a command that ran and found problems (exit 3); what
// it found has been written already.
var errProblemsFound = errors.New("problems found")

// globals are the settings every command shares, from flags or DOCLOG_*.
type globals struct {
	// Connections are Postgres, Kafka and ClickHouse, bound as doclog
	// serve binds them (internal/connflags).
	connflags.Connections
	profile
	topicPrefix string
	output      string
	timeout     time.Duration

	out, errOut io.Writer
}

func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	root := newRoot(out, errOut)
	usageArgs(root)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errProblemsFound):
		return exitProblems
	case errors.As(err, &ue):
		fmt.Fprintln(errOut, "doclogctl:", escapeLines(err.Error()))
		return exitUsage
	default:
		fmt.Fprintln(errOut, "doclogctl:", escapeLines(err.Error()))
		return exitFailed
	}
}

func newRoot(out, errOut io.Writer) *cobra.Command {
	g := &globals{out: out, errOut: errOut}
	root := &cobra.Command{
		Use:           "doclogctl",
		Short:         "Operate doclog: migrations, topics, jobs, dead letters, projectors, documents",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.configure(cmd); err != nil {
				return err
			}
			if g.output != "table" && g.output != "json" {
				return usagef("--output must be table or json, not %q", g.output)
			}
			return nil
		},
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	connflags.Bind(pf, g.Targets(), "doclogctl")
	bindProfileFlags(pf, g)
	pf.StringVar(&g.topicPrefix, "topics-prefix", "", "prefix of doclog's topic names")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	pf.DurationVar(&g.timeout, "timeout", 2*time.Minute, "bound on the whole command")
	config.AnnotateUsage(pf)

	root.AddCommand(newMigrateCmd(g), newDocsCmd(g), newJobsCmd(g), newTopicsCmd(g), newDLQCmd(g), newStatusCmd(g), newBenchCmd(g), newProjectorCmd(g), newVerifyCmd(g), newContextCmd(g))
	hintUnreachable(root, g)
	buildinfo.Install(root, func() bool { return g.output == "json" })
	return root
}

// store opens the operation log.
func (g *globals) store(ctx context.Context) (*postgres.Store, error) {
	if g.DatabaseURL == "" {
		return nil, usagef("no database: set --database-url, DOCLOG_DATABASE_URL, DOCLOG_DATABASE_URL_FILE or DATABASE_URL, or add database-url to a context (doclogctl context list)")
	}
	s, err := g.OpenLog(ctx)
	if err != nil {
		return nil, g.unreachable(err)
	}
	return s, nil
}

func (g *globals) kafka() kafka.Config {
	return g.Kafka.WithDefaults()
}

func (g *globals) registry() (*model.Registry, error) {
	return builtin.NewRegistry()
}

// withTimeout bounds a command by --timeout.
func (g *globals) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.timeout)
}

// render writes v as indented JSON with -o json, or as the table fill builds;
// either way text that could drive the terminal is escaped (escape.go).
func (g *globals) render(v any, fill func(t table.Writer)) error {
	if g.output == "json" {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return err
		}
		_, err := g.out.Write(escapeJSON(buf.Bytes()))
		return err
	}
	t := table.NewWriter()
	t.SetOutputMirror(g.out)
	t.SetStyle(table.StyleLight)
	fill(escapingTable{t})
	t.Render()
	return nil
}
