package servicecli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// TestDevEndToEnd runs `doclog dev` as a subprocess on a clean data dir,
// submits a document over HTTP, waits for it to be READ_READY, and stops
// the process with SIGTERM, which must end it cleanly. Its data directory
// and everything the process writes in it are for this user alone, and the
// directory above it keeps its mode.
func TestDevEndToEnd(t *testing.T) {
	bin := buildDoclog(t)

	parent := t.TempDir()
	require.NoError(t, os.Chmod(parent, 0o700))
	dataDir := filepath.Join(parent, "data")
	// Analytics join through CLICKHOUSE_URL, into a database of the test's.
	chAddr, chDB := testenv.ClickHouseDatabase(t)
	d := startDev(t, bin, []string{"CLICKHOUSE_URL=clickhouse://" + chAddr + "/" + chDB}, "--data-dir", dataDir,
		"--ingest-addr", "127.0.0.1:0", "--readstore-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0")

	// The banner names the addresses it bound, says they stay on this
	// machine, and hides the local Postgres's password.
	urls := d.urls(t)
	require.Contains(t, d.banner, "Every port listens on loopback only")
	require.NotContains(t, d.banner, "WARNING")
	require.Contains(t, d.banner, "Authentication is off")
	require.Regexp(t, `postgres\s+postgres://postgres:xxxxx@127\.0\.0\.1:\d+/postgres`, d.banner)
	pwFile := regexp.MustCompile(`\(password in (.+)\)`).FindStringSubmatch(d.banner)
	require.NotNil(t, pwFile, "the banner says where the password is:\n%s", d.banner)
	t.Cleanup(func() {
		_ = d.stop()
		_ = os.RemoveAll(filepath.Dir(pwFile[1]))
	})
	pw, err := os.ReadFile(pwFile[1])
	require.NoError(t, err)
	require.NotContains(t, d.banner, strings.TrimSpace(string(pw)))

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
		Status           string `json:"status"`
		ConsistencyToken string `json:"consistencyToken"`
	}
	waitUntil := time.Now().Add(2 * time.Minute)
	for status.Status != "READ_READY" {
		require.True(t, time.Now().Before(waitUntil), "job %s never became READ_READY (last %q):\n%s", accepted.JobID, status.Status, d.output())
		resp, err := client.Get(urls["ingest"] + "/v1/jobs/" + accepted.JobID + "?wait=5s")
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&status))
		resp.Body.Close()
		require.NotEqual(t, "FAILED", status.Status)
	}
	require.NotEmpty(t, status.ConsistencyToken)

	// Read it back through the read store with the job's consistency token,
	// passed as the status gave it.
	req, err := http.NewRequest(http.MethodGet, urls["readstore"]+"/v1/documents/"+accepted.DocumentID, nil)
	require.NoError(t, err)
	req.Header.Set("X-Consistency-Token", status.ConsistencyToken)
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

	// /metrics exposes the series of every role: lag per
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
		`doclog_ingest_backpressure_refusals_total{bound="seconds"}`,
	} {
		require.Contains(t, string(scrape), series, "/metrics lacks %s", series)
	}

	d.requireStops(t)

	fi, err := os.Stat(parent)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "a parent of the data directory changed mode")
	files := 0
	require.NoError(t, filepath.WalkDir(dataDir, func(path string, e fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := e.Info()
		require.NoError(t, err)
		require.Zero(t, info.Mode().Perm()&0o077, "%s is open to other users (%s)", path, info.Mode())
		if strings.Contains(path, "kafka") && !e.IsDir() {
			files++
		}
		return nil
	}))
	require.NotZero(t, files, "the Kafka log is in the data directory")
	require.NotContains(t, d.output(), strings.TrimSpace(string(pw)))
}

// devProc is a `doclog dev` process: its banner, and all it printed.
type devProc struct {
	cmd    *exec.Cmd
	exited chan error
	lines  chan string
	banner string

	once    sync.Once
	exitErr error

	mu  sync.Mutex
	out bytes.Buffer // stdout and stderr, as they come
}

// startDev starts `doclog dev` with env added to the test's environment
// (without the settings dev would read from it) and waits for its banner.
func startDev(t *testing.T, bin string, env []string, args ...string) *devProc {
	t.Helper()
	d := &devProc{cmd: exec.Command(bin, append([]string{"dev"}, args...)...), exited: make(chan error, 1), lines: make(chan string, 1024)}
	d.cmd.Env = append(serveEnv(), env...)
	stdout, err := d.cmd.StdoutPipe()
	require.NoError(t, err)
	d.cmd.Stderr = &lockedWriter{d}
	require.NoError(t, d.cmd.Start())
	t.Cleanup(func() { _ = d.stop() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = (&lockedWriter{d}).Write(append(sc.Bytes(), '\n'))
			select {
			case d.lines <- sc.Text():
			default: // nobody reads the lines after the banner
			}
		}
		close(d.lines)
		d.exited <- d.cmd.Wait()
	}()
	deadline := time.After(3 * time.Minute)
	var banner strings.Builder
	for !strings.HasPrefix(banner.String(), "doclog dev is running") || !strings.Contains(banner.String(), "Ctrl-C stops doclog") {
		select {
		case line, ok := <-d.lines:
			require.True(t, ok, "doclog dev exited before it was ready:\n%s", d.output())
			if strings.HasPrefix(line, "doclog dev is running") {
				banner.Reset()
			}
			banner.WriteString(line + "\n")
		case <-deadline:
			t.Fatalf("doclog dev did not print its banner in time:\n%s", d.output())
		}
	}
	d.banner = banner.String()
	return d
}

// urls are the banner's URLs by name.
func (d *devProc) urls(t *testing.T) map[string]string {
	t.Helper()
	urls := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(ingest|ops|readstore)\s+(http://\S+)`).FindAllStringSubmatch(d.banner, -1) {
		urls[m[1]] = m[2]
	}
	require.Len(t, urls, 3, "the banner names ingest, readstore and ops:\n%s", d.banner)
	return urls
}

func (d *devProc) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// stop sends SIGTERM, so that dev stops its Postgres too, and waits a
// minute for the exit before it kills the process. It returns how the
// process ended, the same on every call.
func (d *devProc) stop() error {
	d.once.Do(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case d.exitErr = <-d.exited:
		case <-time.After(time.Minute):
			_ = d.cmd.Process.Kill()
			<-d.exited
			d.exitErr = errors.New("doclog dev did not stop within a minute of SIGTERM")
		}
	})
	return d.exitErr
}

// requireStops requires a clean exit on SIGTERM.
func (d *devProc) requireStops(t *testing.T) {
	t.Helper()
	require.NoError(t, d.stop(), "doclog dev must exit cleanly on SIGTERM:\n%s", d.output())
}

type lockedWriter struct{ d *devProc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.d.out.Write(b)
}
