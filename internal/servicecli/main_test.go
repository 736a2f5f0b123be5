package servicecli

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// doclog dev writes its doclogctl context into the user's config
	// directory: the tests', and the processes they start, is one of the
	// run's own, never the user's.
	dir, err := os.MkdirTemp("", "doclog-test-config-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
