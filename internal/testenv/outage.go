package testenv

import (
	"bytes"
	"net"
	"testing"
)

// DownDependency is the address of a dependency that does not answer and
// the strings an API must never show its clients about it: what the
// drivers' errors say (the address, the database's user and name, the
// dialer's wording).
type DownDependency struct {
	// URL is a Postgres URL, or for Kafka the seed broker's host:port.
	URL string
	// Internals are the strings no response body may contain. The port is
	// matched as ":port" and "=port", the forms the drivers write it in, so
	// that the digits inside a random id never count.
	Internals []string
}

// DownPostgres is a Postgres URL nothing listens at, with a user, password
// and database of distinct names, so a response that quotes the driver's
// "failed to connect to `user=… database=…`: host:port … dial error" is
// caught by RequireNoInternals.
func DownPostgres(t testing.TB) DownDependency {
	t.Helper()
	addr := UnusedAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	const user, password, database = "leakcheckuser", "leakcheckpassword", "leakcheckdb"
	return DownDependency{
		URL:       "postgres://" + user + ":" + password + "@" + addr + "/" + database + "?connect_timeout=2",
		Internals: []string{user, password, database, host, ":" + port, "=" + port, "dial", "postgres://"},
	}
}

// DownKafka is a seed broker address nothing listens at.
func DownKafka(t testing.TB) DownDependency {
	t.Helper()
	addr := UnusedAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	return DownDependency{URL: addr, Internals: []string{host, ":" + port, "=" + port, "dial"}}
}

// RequireNoInternals fails the test when body contains any of the strings of
// deps: an error body or readiness answer that leaks what the server talks
// to.
func RequireNoInternals(t testing.TB, body []byte, deps ...DownDependency) {
	t.Helper()
	for _, d := range deps {
		for _, s := range d.Internals {
			if bytes.Contains(body, []byte(s)) {
				t.Fatalf("the response shows %q, which only the server's log may hold: %s", s, body)
			}
		}
	}
}
