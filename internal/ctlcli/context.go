package ctlcli

import (
	"fmt"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
	"github.com/doclog/doclog/internal/redact"
)

// contextRow is one context as list and show print it, secrets masked.
type contextRow struct {
	Name     string            `json:"name"`
	Current  bool              `json:"current"`
	Settings map[string]string `json:"settings"`
	keys     []string
}

func newContextCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "List, show and choose the contexts of the config file: named sets of settings, such as the one doclog dev writes",
		Long: `A context is a named set of settings in the config file (--config,
DOCLOG_CONFIG, else doclog/config.yaml in the user's config directory): the
flags' names as keys, such as database-url and kafka-seeds. The current
context (or the one --context or DOCLOG_CONTEXT names) fills in every flag
not given on the command line or in a DOCLOG_* variable. doclog dev writes
a context named dev with its addresses.`,
	}
	own := map[string]string{ownsConfigFile: "true"}
	list := &cobra.Command{
		Use:         "list",
		Short:       "List the contexts, the current one marked",
		Args:        cobra.NoArgs,
		Annotations: own,
		RunE: func(*cobra.Command, []string) error {
			f := g.file
			rows := make([]contextRow, 0, len(f.Contexts))
			for _, c := range f.Contexts {
				rows = append(rows, g.contextRow(c))
			}
			return g.render(rows, func(t table.Writer) {
				t.SetTitle("contexts in " + f.Path)
				t.AppendHeader(table.Row{"current", "name", "kafka-seeds", "database-url"})
				for _, r := range rows {
					mark := ""
					if r.Current {
						mark = "*"
					}
					t.AppendRow(table.Row{mark, r.Name, r.Settings[connflags.KafkaSeeds], r.Settings[connflags.DatabaseURL]})
				}
			})
		},
	}
	use := &cobra.Command{
		Use:         "use NAME",
		Short:       "Make NAME the current context",
		Args:        cobra.ExactArgs(1),
		Annotations: own,
		RunE: func(_ *cobra.Command, args []string) error {
			f := g.file
			if _, err := g.fileContext(args[0]); err != nil {
				return err
			}
			f.SetCurrentContext(args[0])
			if err := f.Write(); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "current context: %q (in %s)\n", args[0], f.Path)
			return nil
		},
	}
	show := &cobra.Command{
		Use:         "show [NAME]",
		Short:       "Show a context's settings (default: the current one), secrets masked",
		Args:        cobra.MaximumNArgs(1),
		Annotations: own,
		RunE: func(_ *cobra.Command, args []string) error {
			f := g.file
			name := g.contextName
			if len(args) == 1 {
				name = args[0]
			}
			if name == "" {
				name = f.CurrentContext
			}
			if name == "" {
				return fmt.Errorf("%s has no current context: name one (doclogctl context list)", f.Path)
			}
			c, err := g.fileContext(name)
			if err != nil {
				return err
			}
			row := g.contextRow(c)
			return g.render(row, func(t table.Writer) {
				title := fmt.Sprintf("context %q", row.Name)
				if row.Current {
					title += " (current)"
				}
				t.SetTitle(title)
				t.AppendHeader(table.Row{"setting", "value"})
				for _, k := range row.keys {
					t.AppendRow(table.Row{k, row.Settings[k]})
				}
			})
		},
	}
	cmd.AddCommand(list, use, show)
	return cmd
}

// fileContext is the config file's context name, or an error saying it has
// none of that name (not found: exit 1).
func (g *globals) fileContext(name string) (config.Context, error) {
	c, ok := g.file.Context(name)
	if !ok {
		return c, fmt.Errorf("%s has no context %q (doclogctl context list)", g.file.Path, name)
	}
	return c, nil
}

// contextRow masks the secrets of c: a URL keeps all but its password and
// secret parameters, any other secret is masked whole.
func (g *globals) contextRow(c config.Context) contextRow {
	secret := secretFlags(g.root)
	row := contextRow{Name: c.Name, Current: c.Name == g.file.CurrentContext, Settings: map[string]string{}, keys: c.Keys()}
	for _, k := range c.Keys() {
		v := c.Settings[k]
		switch {
		case strings.Contains(v, "://"):
			// Any URL, secret or not, may carry a password.
			v = redact.URL(v)
		case secret[k]:
			v = redact.Mask
		}
		row.Settings[k] = v
	}
	return row
}

// secretFlags are the names of root's flags marked secret.
func secretFlags(root *cobra.Command) map[string]bool {
	secret := map[string]bool{}
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if config.IsSecret(f) {
			secret[f.Name] = true
		}
	})
	return secret
}
