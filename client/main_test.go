package client_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain starts one doclog stack for the package's examples and
// real-stack tests, runs them, stops it, and then checks that nothing the
// tests started still runs.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if !needsStack() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := startStack(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "client tests: start the doclog stack:", err)
		return 1
	}
	ingestURL, readstoreURL, newReadstore = s.ingestURL, s.readstoreURL, s.newReadstore
	stackKafka, stackIngestDeps = s.kafka, s.ingestDeps
	code := m.Run()
	s.stop()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "client tests: goroutines left running:", err)
			return 1
		}
	}
	return code
}

// needsStack reports whether this run may reach a test or example that
// uses the stack: not when it only lists the tests or fuzzes (the fuzz
// target is the SSE parser's, and each fuzz worker runs TestMain again).
func needsStack() bool {
	for _, name := range []string{"test.list", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	f := flag.Lookup("test.fuzzworker")
	return f == nil || f.Value.String() != "true"
}
