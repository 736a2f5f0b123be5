package executor_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(memberProcessEnv); spec != "" {
		// A member process started by a test, to be killed for real.
		os.Exit(runMemberProcess(spec))
	}
	goleak.VerifyTestMain(m)
}
