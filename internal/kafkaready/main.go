// Command kafkaready waits until a Kafka broker serves metadata that lists it
// as a live broker. scripts/kafka.sh runs it after starting the test broker,
// because an open port comes well before a broker that can create topics.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	seeds := flag.String("seeds", "", "comma-separated host:port list")
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait")
	pid := flag.Int("pid", 0, "give up as soon as this process has exited")
	flag.Parse()
	if err := wait(strings.Split(*seeds, ","), *timeout, *pid); err != nil {
		fmt.Fprintln(os.Stderr, "kafkaready:", err)
		os.Exit(1)
	}
}

func wait(seeds []string, timeout time.Duration, pid int) error {
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
		if pid > 0 && syscall.Kill(pid, 0) != nil {
			return fmt.Errorf("broker process %d exited", pid)
		}
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		brokers, err := adm.ListBrokers(attempt)
		cancelAttempt()
		if err == nil && len(brokers) > 0 {
			fmt.Fprintf(os.Stderr, "kafka ready at %s after %s\n", strings.Join(seeds, ","), time.Since(start).Round(time.Millisecond))
			return nil
		}
		if err == nil {
			err = errors.New("metadata lists no broker yet")
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker not ready after %s: %w", timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
