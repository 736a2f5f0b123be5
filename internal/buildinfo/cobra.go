package buildinfo

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

// Install gives root a --version flag and a version subcommand, both
// printing "NAME VERSION (commit …; go…)" from Read. asJSON, if not nil,
// says when the subcommand writes the Info as JSON instead (doclogctl's
// -o json).
func Install(root *cobra.Command, asJSON func() bool) {
	in := Read()
	root.Version = in.String()
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON != nil && asJSON() {
				b, err := json.MarshalIndent(in, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", root.Name(), in.String())
			return err
		},
	})
}
