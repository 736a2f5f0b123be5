// Command doclog is the doclog service. This version carries the operation
// log's schema management; the pipeline roles (serve, dev) arrive with the
// stages that implement them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd(os.Stdout).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "doclog:", err)
		os.Exit(1)
	}
}
