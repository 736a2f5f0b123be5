package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// TestDevEndToEnd runs `doclog dev` as a subprocess on a clean data dir,
// submits a document over HTTP, waits for it to be READ_READY, and stops
// the process with SIGTERM, which must end it cleanly.
func TestDevEndToEnd(t *testing.T) {
	bin := buildDoclog(t)

	dataDir := filepath.Join(t.TempDir(), "data")
	// Analytics join through CLICKHOUSE_URL, into a database of the test's.
	chAddr, chDB := testenv.ClickHouseDatabase(t)
	cmd := exec.Command(bin, "dev", "--data-dir", dataDir,
		"--ingest-addr", "127.0.0.1:0", "--readstore-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "DOCLOG_DATABASE_URL=", "CLICKHOUSE_URL=clickhouse://"+chAddr+"/"+chDB)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	// The banner names the addresses it bound.
	urls := map[string]string{}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	re := regexp.MustCompile(`^\s+(ingest|ops|readstore)\s+(http://\S+)`)
	deadline := time.After(3 * time.Minute)
	for urls["ingest"] == "" || urls["ops"] == "" || urls["readstore"] == "" {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "doclog dev exited before it was ready:\n%s", stderr.String())
			if m := re.FindStringSubmatch(line); m != nil {
				urls[m[1]] = m[2]
			}
		case <-deadline:
			t.Fatalf("doclog dev did not print its URLs in time:\n%s", stderr.String())
		}
	}
	go func() {
		for range lines { // keep draining so the child never blocks on stdout
		}
	}()

	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(urls["ingest"]+"/v1/documents", "application/json",
		strings.NewReader(`{"documentType":"doclog/json","name":"hello","actions":[{"type":"MERGE_PATCH","scope":"global","input":{"greeting":"hi"}}]}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	var accepted struct {
		JobID      string `json:"jobId"`
		DocumentID string `json:"documentId"`
	}
	require.NoError(t, json.Unmarshal(body, &accepted))

	var status struct {
		Status           string          `json:"status"`
		ConsistencyToken json.RawMessage `json:"consistencyToken"`
	}
	waitUntil := time.Now().Add(2 * time.Minute)
	for status.Status != "READ_READY" {
		require.True(t, time.Now().Before(waitUntil), "job %s never became READ_READY (last %q):\n%s", accepted.JobID, status.Status, stderr.String())
		resp, err := client.Get(urls["ingest"] + "/v1/jobs/" + accepted.JobID + "?wait=5s")
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&status))
		resp.Body.Close()
		require.NotEqual(t, "FAILED", status.Status)
	}
	require.Contains(t, string(status.ConsistencyToken), `"coordinates"`)

	// Read it back through the read store with the job's consistency token.
	token := []byte(status.ConsistencyToken)
	req, err := http.NewRequest(http.MethodGet, urls["readstore"]+"/v1/documents/"+accepted.DocumentID, nil)
	require.NoError(t, err)
	req.Header.Set("X-Consistency-Token", base64.RawURLEncoding.EncodeToString(token))
	resp, err = client.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"greeting":"hi"`, "the job's effect is visible with its token")
	require.Contains(t, string(body), `"hello"`)

	resp, err = client.Get(urls["ops"] + "/readyz")
	require.NoError(t, err)
	ready, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(ready))
	for _, check := range []string{"executor", "projector.docview", "projector.indexer", "projector.analytics", "postgres", "kafka"} {
		require.Contains(t, string(ready), `"`+check+`"`)
	}

	// /metrics exposes the series of every role (issue 6): lag per
	// partition, stage durations, batch sizes, conflicts, retries, dead
	// letters, projector lag, pool stats, the tail's blocker, job latency.
	resp, err = client.Get(urls["ops"] + "/metrics")
	require.NoError(t, err)
	scrape, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{
		"doclog_consumer_lag_records{", "doclog_consumer_lag_seconds{",
		`doclog_executor_stage_seconds_bucket{stage="decode"`, `doclog_executor_stage_seconds_bucket{stage="load"`,
		`doclog_executor_stage_seconds_bucket{stage="reduce"`, `doclog_executor_stage_seconds_bucket{stage="append"`,
		`doclog_executor_stage_seconds_bucket{stage="produce"`, `doclog_executor_stage_seconds_bucket{stage="commit"`,
		"doclog_executor_batch_jobs_bucket", "doclog_executor_batch_operations_bucket",
		"doclog_executor_append_conflicts_total", "doclog_executor_retries_total", "doclog_executor_dead_letters_total{",
		"doclog_executor_job_write_ready_seconds_bucket",
		"doclog_projector_stage_seconds_bucket", "doclog_projector_lag_records{", "doclog_projector_quarantined_streams{",
		`doclog_projector_job_latency_seconds_bucket{from="submit",projector="docview"`,
		"doclog_pgxpool_acquire_seconds_total", "doclog_pgxpool_empty_acquire_wait_seconds_total", "doclog_pgxpool_total_conns",
		"doclog_postgres_oldest_transaction_seconds", "doclog_readstore_requests_total",
		`doclog_ingest_requests_total{code="202",route="POST /v1/documents"}`, "doclog_ingest_produce_seconds_bucket",
	} {
		require.Contains(t, string(scrape), series, "/metrics lacks %s", series)
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "doclog dev must exit cleanly on SIGTERM:\n%s", stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("doclog dev did not stop within a minute of SIGTERM:\n%s", stderr.String())
	}
}
