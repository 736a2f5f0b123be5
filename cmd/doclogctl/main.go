// Command doclogctl is doclog's admin CLI. Exit codes scripts can rely on:
// 0 success; 1 the operation failed; 2 bad usage or configuration; 3 the
// command ran and found problems (an inconsistent document, say). The
// commands live in internal/ctlcli, which a projector's own worker binary
// (package worker) shares.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/doclog/doclog/internal/ctlcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctlcli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
