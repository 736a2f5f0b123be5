package ctlcli

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
)

// contextFlag names the context to use instead of the current one.
const contextFlag = "context"

// ownsConfigFile marks a command that reads the config file itself (the
// context commands), so the current context is not applied before it runs.
const ownsConfigFile = "doclog.io/owns-config-file"

// profile is where doclogctl's settings came from: the config file and the
// context in it, for commands that edit the file and for messages that say
// what to change.
type profile struct {
	contextName string // --context or DOCLOG_CONTEXT
	configPath  string // the file read, or to write ("" when none)
	file        *config.File
	context     string // the context applied ("" when none)
	root        *cobra.Command
}

func bindProfileFlags(fs *pflag.FlagSet, g *globals) {
	fs.String(config.FileFlag, "", "config file of settings and contexts (default: doclog/config.yaml in the user's config directory, such as ~/.config/doclog/config.yaml)")
	fs.StringVar(&g.contextName, contextFlag, "", "context of the config file to use (default: its current-context)")
}

// configure resolves every setting of cmd: a flag given, then DOCLOG_*
// (and DATABASE_URL, CLICKHOUSE_URL), then the context (--context, else
// the file's current-context), then the file's top level, then the
// default. Any problem is a usage error.
func (g *globals) configure(cmd *cobra.Command) error {
	defer g.Resolve()
	g.root = cmd.Root()
	_, own := cmd.Annotations[ownsConfigFile]
	fs := cmd.Flags()
	if err := connflags.ApplyEnv(fs, nil); err != nil {
		return usageError{err}
	}
	def, defErr := config.DefaultFilePath()
	path := config.FilePath(fs, nil, def)
	if path == "" {
		// No home to find the default in: settings come from flags and
		// variables only, unless a command needs the file.
		if g.contextName != "" || own {
			return usageError{defErr}
		}
		return nil
	}
	g.configPath = path
	f, err := config.ReadFile(path, path == def)
	if err != nil {
		return usageError{err}
	}
	g.file = f
	if own {
		return nil
	}
	g.context = g.contextName
	if g.context == "" {
		g.context = f.CurrentContext
	}
	if err := f.Apply(fs, g.context, knownFlags(cmd.Root())); err != nil {
		return usageError{err}
	}
	return nil
}

// knownFlags reports whether a name is a flag of any command under root: a
// config file may set a flag of another command than the one running
// (a context's ingest-url serves bench), but no name that is none.
func knownFlags(root *cobra.Command) func(string) bool {
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	// doclog dev writes the readstore's address into its context for
	// scripts (doclogctl context show -o json); no command takes it.
	names["readstore-url"] = true
	delete(names, contextFlag)
	delete(names, "help")
	return func(name string) bool { return names[name] }
}

// hintUnreachable wraps every command's RunE so that an error that is a
// broker not answering says where the address came from and how to
// change it.
func hintUnreachable(root *cobra.Command, g *globals) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(c *cobra.Command, args []string) error {
				return g.unreachableKafka(run(c, args))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unreachableError is a server doclogctl could not reach, with what to
// change; it unwraps to the cause.
type unreachableError struct {
	what, addr, flag, context string
	err                       error
}

func (e *unreachableError) Error() string {
	where := ""
	fix := fmt.Sprintf("set --%s or %s", e.flag, config.EnvName(e.flag))
	if e.context != "" {
		where = fmt.Sprintf(" (context %q)", e.context)
		fix += ", or update the context"
	} else {
		fix += ", or add a context (doclogctl context)"
	}
	return fmt.Sprintf("cannot reach %s at %s%s: %s: %v", e.what, e.addr, where, fix, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// unreachable names the database, the context and the flag in an error of
// opening the store (a server that does not answer, or refuses the login).
func (g *globals) unreachable(err error) error {
	addr := "the configured address"
	if u, perr := url.Parse(g.DatabaseURL); perr == nil && u.Host != "" {
		addr = u.Host
	}
	return &unreachableError{what: "Postgres", addr: addr, flag: connflags.DatabaseURL, context: g.context, err: err}
}

// unreachableKafka names the seeds, the context and the flag in an error
// whose cause is a connection to a broker that could not be made; any
// other error is returned as it is.
func (g *globals) unreachableKafka(err error) error {
	var op *net.OpError
	var ue *unreachableError
	if err == nil || errors.As(err, &ue) || !errors.As(err, &op) || op.Op != "dial" || !g.isSeed(op.Addr) {
		return err
	}
	return &unreachableError{what: "Kafka", addr: strings.Join(g.Kafka.Seeds, ","), flag: connflags.KafkaSeeds, context: g.context, err: err}
}

// isSeed reports whether a dialled address is one of the seeds' (by port,
// since a seed's host name dials as an address): a dial elsewhere, such as
// ClickHouse or an ingest URL, is not Kafka's.
func (g *globals) isSeed(addr net.Addr) bool {
	if addr == nil {
		return false
	}
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	for _, s := range g.Kafka.Seeds {
		if _, p, err := net.SplitHostPort(s); err == nil && p == port {
			return true
		}
	}
	return false
}
