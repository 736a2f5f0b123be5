// Command chaosrun runs one chaos run of doclog (see package chaos) and
// prints its report. scripts/chaos.sh, behind `make chaos`, invokes it.
//
// Exit codes: 0 the run passed, 1 it found problems (lost, duplicated or
// divergent jobs, a drain over the limit), 2 it could not be carried out.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/doclog/doclog/internal/chaos"
)

func main() {
	var c chaos.Config
	profile := flag.String("profile", "full", "fault profile: full (make chaos) or short (the package's test)")
	flag.Uint64Var(&c.Seed, "seed", 1, "seed of the fault schedule and the load")
	flag.Float64Var(&c.Rate, "rate", 300, "jobs per second the load submits")
	flag.IntVar(&c.Workers, "workers", 64, "concurrent submits")
	flag.IntVar(&c.SyncDrivers, "sync-drivers", chaos.DefaultSyncDrivers, "replica documents written by load jobs, and as many documents whose branches are forked and promoted, each by one driver")
	flag.DurationVar(&c.DrainLimit, "drain-limit", 10*time.Second, "fail when the last acknowledged job settles later than this after the last fault")
	flag.DurationVar(&c.Settle, "settle", 2*time.Minute, "how long to wait after the last fault for every acknowledged job to settle")
	flag.DurationVar(&c.VerifyWait, "verify-wait", time.Minute, "how long doclogctl verify lets the projections catch up")
	flag.StringVar(&c.Dir, "dir", "", "directory of the run's logs, binaries and data (default: a new temporary one, kept)")
	flag.StringVar(&c.ClickHouseAddr, "clickhouse-addr", "", "a running ClickHouse to use (native protocol host:port); default: start one")
	flag.StringVar(&c.Source, "src", "", "build doclog from this checkout (e.g. a git worktree of an older commit) instead of this one")
	flag.Func("member-env", "KEY=VALUE added to every member's environment, e.g. DOCLOG_EXECUTOR_ASYNC_ANNOUNCE=true (repeat it)", func(kv string) error {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("not KEY=VALUE: %q", kv)
		}
		c.MemberEnv = append(c.MemberEnv, kv)
		return nil
	})
	flag.Parse()
	switch *profile {
	case "full":
		c.Profile = chaos.Full
	case "short":
		c.Profile = chaos.Short
	default:
		fmt.Fprintf(os.Stderr, "chaosrun: -profile is full or short, not %q\n", *profile)
		os.Exit(2)
	}
	c.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := chaos.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaosrun:", err)
		stop()
		os.Exit(2)
	}
	r.Print(os.Stdout)
	if len(r.Failures()) > 0 {
		stop()
		os.Exit(1)
	}
}
