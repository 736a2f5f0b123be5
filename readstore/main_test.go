package readstore_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if args := os.Getenv(serveProcessEnv); args != "" {
		// A `doclog serve` process started by a test, to be killed for
		// real.
		os.Exit(runServeProcess(args))
	}
	goleak.VerifyTestMain(m)
}
