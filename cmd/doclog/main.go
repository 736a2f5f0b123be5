// Command doclog is the doclog service: `serve` runs the roles it is given
// (ingest, executor, projectors, readstore) against external Postgres, Kafka
// and ClickHouse, `dev` runs all of them in one process with an in-process
// broker and a local Postgres, and `migrate` applies or reports the schema.
// The commands live in internal/servicecli, which a projector's own worker
// binary (package worker) shares.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/doclog/doclog/internal/servicecli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := servicecli.NewRootCmd(os.Stdout).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "doclog:", err)
		os.Exit(1)
	}
}
