package ctlcli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// usageArgs makes every argument error of the command tree a usage error
// (exit 2): cobra's Args validators return plain errors, a group given a
// subcommand it does not have would print its help and exit 0, and the root
// reports an unknown command outside any validator. Run it once the tree is
// built; it also adds cobra's help and completion commands first, so theirs
// are covered too.
func usageArgs(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			// A group: its only arguments are its subcommands' names, and
			// alone it prints its help.
			c.Args = unknownSubcommand
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
		if validate := c.Args; validate != nil {
			c.Args = func(c *cobra.Command, args []string) error {
				err := validate(c, args)
				if err == nil || errors.As(err, new(usageError)) {
					return err
				}
				return usagef("%v (usage: %s)", err, c.UseLine())
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownSubcommand refuses any argument of a group, suggesting the
// subcommands it may have meant.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	msg := fmt.Sprintf("unknown command %q for %q (commands: %s)", args[0], c.CommandPath(), strings.Join(names, ", "))
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
	}
	return usageError{errors.New(msg)}
}
