package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestEmbeddedStack starts the composition against the real Postgres and
// Kafka the repository's test scripts start (TEST_DATABASE_URL,
// TEST_KAFKA_SEEDS; run by `make test`), creates a document through the
// submit API, and finds it through the read API and in the counter's
// table: a projector of this module, fed by doclog's executor.
func TestEmbeddedStack(t *testing.T) {
	dbURL, seeds := os.Getenv("TEST_DATABASE_URL"), os.Getenv("TEST_KAFKA_SEEDS")
	if dbURL == "" || seeds == "" {
		t.Fatal("TEST_DATABASE_URL and TEST_KAFKA_SEEDS are not set: run `make test`, or start the services with scripts/pg.sh and scripts/kafka.sh and export what they print")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "embed_" + hex.EncodeToString(suffix)

	// A schema of the test's own, reached through search_path.
	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE") })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-csearch_path="+name)
	u.RawQuery = q.Encode()

	s, err := Start(ctx, Options{DatabaseURL: u.String(), KafkaSeeds: []string{seeds}, TopicPrefix: name + ".",
		IngestAddr: "127.0.0.1:0", ReadstoreAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()

	body := `{"documentType":"doclog/json","name":"embedded","slug":"embedded-` + name + `",
"actions":[{"type":"MERGE_PATCH","scope":"global","input":{"n":1}}]}`
	resp, err := http.Post("http://"+s.Ingest.Addr().String()+"/v1/documents", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	var accepted struct{ JobID, DocumentID string }
	if err := json.NewDecoder(resp.Body).Decode(&accepted); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: status %d, %v", resp.StatusCode, err)
	}
	resp.Body.Close()

	// The job settles through the executor.
	var status struct{ Status string }
	getJSON(t, "http://"+s.Ingest.Addr().String()+"/v1/jobs/"+accepted.JobID+"?wait=60s", &status)
	if status.Status != "WRITE_READY" && status.Status != "READ_READY" {
		t.Fatalf("job %s ended %s", accepted.JobID, status.Status)
	}

	// The document view serves it, and the counter counted its four
	// operations (create, name, slug, patch).
	deadline := time.Now().Add(time.Minute)
	for {
		var doc struct{ ID, Name string }
		code := getJSONStatus(t, "http://"+s.Readstore.Addr().String()+"/v1/documents/"+accepted.DocumentID, &doc)
		var n int64
		err := admin.QueryRow(ctx, "SELECT operations FROM "+name+".example_type_counts WHERE document_type = 'doclog/json' AND branch = 'main'").Scan(&n)
		if code == http.StatusOK && doc.Name == "embedded" && err == nil && n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: read API %d %+v; counter %d (%v)", code, doc, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getJSON(t *testing.T, u string, into any) {
	t.Helper()
	if code := getJSONStatus(t, u, into); code != http.StatusOK {
		t.Fatalf("GET %s: status %d", u, code)
	}
}

func getJSONStatus(t *testing.T, u string, into any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatal(fmt.Errorf("decode %s: %w", u, err))
		}
	}
	return resp.StatusCode
}
