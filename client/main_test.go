package client_test

import (
	"context"
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := startStack(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "client tests: start the doclog stack:", err)
		return 1
	}
	ingestURL, readstoreURL = s.ingestURL, s.readstoreURL
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
