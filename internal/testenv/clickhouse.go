package testenv

import (
	"context"
	"crypto/tls"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// EnvClickHouseAddr names the variable holding the test ClickHouse server's
// native-protocol address (host:port).
const EnvClickHouseAddr = "TEST_CLICKHOUSE_ADDR"

// ClickHouseAddr returns the test server's address, failing the test when it
// is not set.
func ClickHouseAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(EnvClickHouseAddr)
	if addr == "" {
		t.Fatalf("%s is not set: run `make test`, or start a server with `scripts/clickhouse.sh start DIR` and export the %s it prints",
			EnvClickHouseAddr, EnvClickHouseAddr)
	}
	return addr
}

// ClickHouseDatabase creates an empty database for the test and returns the
// server address and its name. The database is dropped when the test ends.
func ClickHouseDatabase(t testing.TB) (addr, database string) {
	t.Helper()
	addr = ClickHouseAddr(t)
	return addr, clickHouseDatabaseAt(t, addr, nil)
}

// clickHouseDatabaseAt is ClickHouseDatabase on the server at addr, reached
// with tc when it is not nil.
func clickHouseDatabaseAt(t testing.TB, addr string, tc *tls.Config) string {
	t.Helper()
	database := UniqueName(t, "t_")
	exec := func(query string) error {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, TLS: tc, DialTimeout: 10 * time.Second})
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return conn.Exec(ctx, query)
	}
	if err := exec("CREATE DATABASE " + database); err != nil {
		t.Fatalf("creating ClickHouse test database %s at %s: %v (is it running? see `make test`)", database, addr, err)
	}
	t.Cleanup(func() {
		if err := exec("DROP DATABASE IF EXISTS " + database); err != nil {
			t.Errorf("dropping ClickHouse test database %s: %v", database, err)
		}
	})
	return database
}
