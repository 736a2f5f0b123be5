// Package testenv gives tests their real services: it reads the addresses that
// `make test` exports (TEST_DATABASE_URL, TEST_KAFKA_SEEDS, …) and isolates
// each test in its own schema, topics or database. A test that needs a
// service and finds no address fails with a message saying how to start it;
// it never skips.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDatabaseURL names the variable holding the test Postgres server's URL.
const EnvDatabaseURL = "TEST_DATABASE_URL"

// PostgresURL returns the test server's URL, failing the test when it is not
// set.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvDatabaseURL)
	if u == "" {
		t.Fatalf("%s is not set: run `make test`, or start a server with `scripts/pg.sh start DIR` and export %s to the DATABASE_URL it prints",
			EnvDatabaseURL, EnvDatabaseURL)
	}
	return u
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9_]+`)

// UniqueName returns a lowercase identifier derived from the test's name with
// a random suffix, short enough for Postgres (63 bytes), Kafka and ClickHouse.
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	base := unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if max := 40 - len(prefix); len(base) > max {
		base = base[len(base)-max:]
	}
	return prefix + strings.Trim(base, "_") + "_" + hex.EncodeToString(b[:])
}

// PostgresSchema creates an empty schema for the test and returns a URL whose
// connections use it as their search_path. The schema is dropped when the
// test ends.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	return postgresSchemaAt(t, PostgresURL(t), EnvDatabaseURL)
}

// postgresSchemaAt is PostgresSchema on the server at base, which env names.
func postgresSchemaAt(t testing.TB, base, env string) string {
	t.Helper()
	schema := UniqueName(t, "t_")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to the test database at %s: %v (is it running? see `make test`)", env, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("creating test schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("connecting to drop test schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping test schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(t, base, schema)
}

// WithSearchPath returns the URL with its search_path set to schema.
func WithSearchPath(t testing.TB, rawURL, schema string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parsing %s: %v", EnvDatabaseURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
