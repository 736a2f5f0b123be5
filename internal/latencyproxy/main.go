// Command latencyproxy forwards loopback TCP ports to others with a fixed
// delay each way, so benchmarks can run doclog against a network of real
// round trips on one host (scripts/bench-cluster.sh, scripts/kafka.sh's
// cluster with KAFKA_LINK_LATENCY). Each -link LISTEN=UPSTREAM is a
// toxiproxy proxy, run in this process, with a latency toxic on both
// directions; an upstream need not listen yet, as each connection dials it
// when accepted.
//
// Toxiproxy rather than the chaos run's own proxy (internal/chaos), which
// only cuts: the latency toxic delays each chunk from when it was read, so
// a delay pipelines instead of throttling, and the library is widely used
// for exactly this.
//
// Once every link listens it writes -ready FILE (if given) and runs until
// SIGINT or SIGTERM.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

type links []string

func (l *links) String() string     { return strings.Join(*l, " ") }
func (l *links) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var ls links
	flag.Var(&ls, "link", "LISTEN=UPSTREAM, host:port each (repeatable)")
	latency := flag.Duration("latency", time.Millisecond, "delay added in each direction, in whole milliseconds (0: none)")
	ready := flag.String("ready", "", "file written once every link listens")
	flag.Parse()
	if err := run(ls, *latency, *ready); err != nil {
		fmt.Fprintln(os.Stderr, "latencyproxy:", err)
		os.Exit(1)
	}
}

func run(ls links, latency time.Duration, ready string) error {
	stopLinks, err := start(ls, latency)
	if err != nil {
		return err
	}
	defer stopLinks()
	fmt.Fprintf(os.Stderr, "latencyproxy: %d links, %s each way\n", len(ls), latency)
	if ready != "" {
		if err := os.WriteFile(ready, []byte("ready\n"), 0o644); err != nil {
			return fmt.Errorf("writing the ready file: %w", err)
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	return nil
}

// start starts the links; the function it returns stops them and drops
// their connections.
func start(ls links, latency time.Duration) (func(), error) {
	if len(ls) == 0 {
		return nil, errors.New("no -link given")
	}
	if latency < 0 || latency%time.Millisecond != 0 {
		return nil, fmt.Errorf("-latency %s: the latency toxic takes whole milliseconds", latency)
	}
	// Warnings only: toxiproxy logs every accepted connection at info.
	logger := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	stop := func() { _ = server.Collection.Clear() }
	for i, l := range ls {
		listen, upstream, ok := strings.Cut(l, "=")
		if !ok || listen == "" || upstream == "" {
			stop()
			return nil, fmt.Errorf("-link %q is not LISTEN=UPSTREAM", l)
		}
		p := toxiproxy.NewProxy(server, fmt.Sprintf("link%d", i+1), listen, upstream)
		if err := server.Collection.Add(p, true); err != nil {
			stop()
			return nil, fmt.Errorf("starting the link %s: %w", l, err)
		}
		if latency == 0 {
			continue
		}
		for _, dir := range []string{"upstream", "downstream"} {
			toxic := fmt.Sprintf(`{"type":"latency","stream":%q,"attributes":{"latency":%d}}`, dir, latency.Milliseconds())
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
				stop()
				return nil, fmt.Errorf("adding the %s latency of %s: %w", dir, l, err)
			}
		}
	}
	return stop, nil
}
