// Package worker makes the binary that runs projectors of another module:
// a main of a few lines hands it the projectors' specs,
//
//	func main() { worker.Main(balances.Spec()) }
//
// and the binary has doclog's commands for them, with doclog's flags,
// DOCLOG_* variables, config file and exit codes:
//
//   - serve: what `doclog serve --roles=projectors` does, running the
//     given projectors unless --projectors names others: one consumer
//     group each, fenced checkpoints committed with the projection,
//     verified hashes, healed gaps, quarantines, and the ops port with
//     /healthz, /readyz and /metrics (lag included). A projector whose
//     spec chooses its start (ChoosesStart) starts where --start says.
//   - migrate and migrate status: doclog's migration sets and those of
//     every spec.
//   - projector list|lag|rebuild NAME and quarantine list|lift: doclogctl's
//     operator commands, for these projectors.
//
// The specs go into projectors/catalog (catalog.Register), so the service,
// the migrations and the commands see them as they see a built-in
// projector.
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/buildinfo"
	"github.com/doclog/doclog/internal/ctlcli"
	"github.com/doclog/doclog/internal/servicecli"
	"github.com/doclog/doclog/projectors/catalog"
)

// StartFlag is the worker's flag of the start position of the projectors
// whose spec chooses it (catalog.Spec.ChoosesStart).
const StartFlag = "start"

// Main runs the worker's command line (os.Args) with the projectors of
// specs and exits with its code: 0 success, 1 failure, 2 bad usage or
// configuration (an invalid or duplicate spec too), 3 problems found.
// SIGINT and SIGTERM stop it gracefully.
func Main(specs ...catalog.Spec) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr, specs...)
	stop()
	os.Exit(code)
}

// Run is Main without the process: it runs args as the binary name and
// returns the exit code.
func Run(ctx context.Context, name string, args []string, out, errOut io.Writer, specs ...catalog.Spec) int {
	root, err := Command(name, out, errOut, specs...)
	if err != nil {
		fmt.Fprintln(errOut, name+":", err)
		return 2
	}
	return ctlcli.Execute(ctx, root, args, errOut)
}

// registered are the specs this process registered, by name: building a
// second command tree (a test's) registers them once.
var (
	mu         sync.Mutex
	registered = map[string]bool{}
)

// Command registers the specs in the catalog and returns the worker's
// command tree, named name. It refuses no spec at all, and a spec
// catalog.Register refuses.
func Command(name string, out, errOut io.Writer, specs ...catalog.Spec) (*cobra.Command, error) {
	if len(specs) == 0 {
		return nil, errors.New("a worker needs the spec of at least one projector")
	}
	names := make([]string, len(specs))
	mu.Lock()
	for i, s := range specs {
		names[i] = s.Name
		if registered[s.Name] {
			continue
		}
		if err := catalog.Register(s); err != nil {
			mu.Unlock()
			return nil, fmt.Errorf("registering projector %q: %w", s.Name, err)
		}
		registered[s.Name] = true
	}
	mu.Unlock()

	root := &cobra.Command{
		Use:           name,
		Short:         "Run and operate the projectors " + strings.Join(names, ", ") + " of a doclog deployment",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	serve := servicecli.NewServeCmd(out, servicecli.ServeOptions{
		Short: "Run the projectors (" + strings.Join(names, ", ") + " unless --projectors says otherwise) against Postgres and Kafka",
		Name:  name,
		Flags: app.FlagDefaults{Roles: []string{app.RoleProjectors}, Projectors: names, StartFlag: StartFlag},
	})
	root.AddCommand(serve, servicecli.NewMigrateCmd(out))
	root.AddCommand(ctlcli.Commands(out, errOut, name, names)...)
	buildinfo.Install(root, nil)
	return root, nil
}
