// Package ctlcli is the command tree of doclogctl, the admin CLI: its
// global flags (the connection settings doclog serve shares, contexts of a
// config file, output format), its exit codes and its commands.
// cmd/doclogctl runs it whole; a projector's worker binary (package worker)
// takes the projector and quarantine commands from it (Commands, Execute).
package ctlcli

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
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors/catalog"
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
	// projectors are the projectors the projector and quarantine commands
	// take; nil: every one of the catalog.
	projectors []string
}

// projectorNames are the projectors the commands take.
func (g *globals) projectorNames() []string {
	if g.projectors != nil {
		return g.projectors
	}
	return catalog.Names()
}

// Run runs doclogctl with args and returns its exit code.
func Run(ctx context.Context, args []string, out, errOut io.Writer) int {
	return run(ctx, args, out, errOut)
}

func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	return Execute(ctx, newRoot(out, errOut), args, errOut)
}

// Execute runs root with args as doclogctl runs its own tree and returns
// the exit code: 0 success, 1 the operation failed, 2 bad usage or
// configuration (a bad flag or argument anywhere in the tree, an unknown
// command), 3 the command ran and found problems. An error is written to
// errOut after the root's name, escaped.
func Execute(ctx context.Context, root *cobra.Command, args []string, errOut io.Writer) int {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
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
		fmt.Fprintln(errOut, root.Name()+":", escapeLines(err.Error()))
		return exitUsage
	default:
		fmt.Fprintln(errOut, root.Name()+":", escapeLines(err.Error()))
		return exitFailed
	}
}

// Commands are the operator's commands for the projectors named (the
// catalog's, registered ones included): projector list|lag|rebuild and
// quarantine list|lift, each with doclogctl's global flags, contexts and
// conventions of its own, so that a binary of another module can add them
// to its tree (run it with Execute). clientID names the binary to Kafka.
func Commands(out, errOut io.Writer, clientID string, projectors []string) []*cobra.Command {
	g := &globals{out: out, errOut: errOut, projectors: projectors}
	quarantine := newQuarantineCmd(g)
	quarantine.PersistentFlags().String("branch", oplog.DefaultBranch, "branch of the document")
	cmds := []*cobra.Command{newProjectorCmd(g), quarantine}
	for _, c := range cmds {
		g.bindGlobals(c, clientID)
		hintUnreachable(c, g)
	}
	return cmds
}

// bindGlobals declares the flags every command shares on cmd, for it and
// the commands under it, and resolves them before any of those runs.
func (g *globals) bindGlobals(cmd *cobra.Command, clientID string) {
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := g.configure(cmd); err != nil {
			return err
		}
		if g.output != "table" && g.output != "json" {
			return usagef("--output must be table or json, not %q", g.output)
		}
		return nil
	}
	pf := cmd.PersistentFlags()
	connflags.Bind(pf, g.Targets(), clientID)
	bindProfileFlags(pf, g)
	pf.StringVar(&g.topicPrefix, "topics-prefix", "", "prefix of doclog's topic names")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	pf.DurationVar(&g.timeout, "timeout", 2*time.Minute, "bound on the whole command")
	config.AnnotateUsage(pf)
}

func newRoot(out, errOut io.Writer) *cobra.Command {
	g := &globals{out: out, errOut: errOut}
	root := &cobra.Command{
		Use:           "doclogctl",
		Short:         "Operate doclog: migrations, topics, jobs, dead letters, projectors, documents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	g.bindGlobals(root, "doclogctl")

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
	return catalog.Registry()
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
