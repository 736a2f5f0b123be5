package testenv

import (
	"net"
	"testing"
)

// UnusedAddr returns a local host:port nothing listens on, for a dependency
// that is down until the test starts something there.
func UnusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
