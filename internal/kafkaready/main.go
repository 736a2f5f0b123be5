// Command kafkaready waits until a Kafka broker serves metadata that lists it
// as a live broker (with -brokers N, until it lists N of them: a cluster
// whose topics are to be replicated N times). scripts/kafka.sh runs it after
// starting the test broker, because an open port comes well before a broker
// that can create topics.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	seeds := flag.String("seeds", "", "comma-separated host:port list")
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait")
	pids := flag.String("pid", "", "comma-separated process ids: give up as soon as one has exited")
	brokers := flag.Int("brokers", 1, "how many live brokers the metadata must list")
	flag.Parse()
	var watch []int
	for _, p := range strings.FieldsFunc(*pids, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kafkaready: -pid %q is not a list of process ids\n", *pids)
			os.Exit(2)
		}
		watch = append(watch, n)
	}
	if err := wait(strings.Split(*seeds, ","), *timeout, watch, *brokers); err != nil {
		fmt.Fprintln(os.Stderr, "kafkaready:", err)
		os.Exit(1)
	}
}

func wait(seeds []string, timeout time.Duration, pids []int, want int) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RetryTimeout(time.Second))
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	start := time.Now()
	var last error
	for {
		for _, pid := range pids {
			if syscall.Kill(pid, 0) != nil {
				return fmt.Errorf("broker process %d exited", pid)
			}
		}
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		brokers, err := adm.ListBrokers(attempt)
		cancelAttempt()
		if err == nil && len(brokers) >= max(want, 1) {
			fmt.Fprintf(os.Stderr, "kafka ready at %s after %s\n", strings.Join(seeds, ","), time.Since(start).Round(time.Millisecond))
			return nil
		}
		if err == nil {
			err = fmt.Errorf("metadata lists %d of %d brokers", len(brokers), max(want, 1))
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker not ready after %s: %w", timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
