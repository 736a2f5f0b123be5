package servicecli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
)

// `doclog serve` with every role, started while its broker is down: it
// serves /healthz at once and answers /readyz 503 naming Kafka; once the
// broker starts it creates the topics, becomes ready, and a job submitted
// through ingest ends READ_READY. SIGTERM then stops it cleanly.
func TestServeWaitsForKafka(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	broker := testenv.StartKafkaNode(t)
	kenv := testenv.KafkaAt(t, broker.Seeds)
	broker.Stop() // it keeps its port
	p := startServe(t, bin,
		"--migrate=auto", "--database-url", testenv.PostgresSchema(t),
		"--kafka-seeds", strings.Join(broker.Seeds, ","), "--topics-prefix", kenv.Topics.Prefix, "--topics-jobs-partitions", "2",
		"--projectors", "docview", "--ingest-addr", "127.0.0.1:0", "--readstore-addr", "127.0.0.1:0")

	require.Equal(t, http.StatusOK, p.get(t, "/healthz").code)
	// Postgres answers and is migrated; only Kafka is waited for.
	p.awaitReadyz(t, http.StatusServiceUnavailable, time.Minute, `"failing":["kafka","startup"]`, "waiting for kafka: connection refused")

	broker.Start()
	serving := p.awaitLog(t, "doclog serving", 3*time.Minute)
	p.awaitReadyz(t, http.StatusOK, 3*time.Minute)
	ingestURL := "http://" + serving["ingest"].(string)
	jobID := submitDocument(t, ingestURL)
	deadline := time.Now().Add(3 * time.Minute)
	for status := ""; status != "READ_READY"; {
		require.True(t, time.Now().Before(deadline), "job %s never became READ_READY (last %q)", jobID, status)
		resp, err := http.Get(ingestURL + "/v1/jobs/" + jobID + "?wait=5s")
		require.NoError(t, err)
		var body struct{ Status string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		status = body.Status
		require.NotEqual(t, "FAILED", status)
	}
	p.requireStops(t, time.Minute)
}

// SIGTERM while `doclog serve` waits for Postgres and Kafka ends it at once
// with status 0.
func TestServeStopsWhileWaiting(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	p := startServe(t, bin, "--database-url", "postgres://doclog@"+testenv.UnusedAddr(t)+"/doclog", "--kafka-seeds", testenv.UnusedAddr(t),
		"--roles", "executor,projectors")
	require.Equal(t, http.StatusOK, p.get(t, "/healthz").code)
	p.awaitReadyz(t, http.StatusServiceUnavailable, time.Minute, "waiting for postgres: connection refused", "waiting for kafka: connection refused")
	p.requireStops(t, 30*time.Second)
}

// A configuration error is no outage: `doclog serve` exits at once with
// status 1 and says what is wrong.
func TestServeConfigurationErrorsFailFast(t *testing.T) {
	t.Parallel()
	bin := buildDoclog(t)
	const shortToken = "short-bearer-token"
	for _, c := range []struct {
		args   []string
		want   string
		hidden string // what stderr must not show
	}{
		{[]string{"--database-url", "postgres://doclog@127.0.0.1:99999999/doclog"}, "parsing the database URL", ""},
		{[]string{"--database-url", "postgres://doclog@127.0.0.1:9/doclog", "--migrate", "sometimes"}, "--migrate must be auto or off", ""},
		{[]string{"--database-url", "postgres://doclog@127.0.0.1:9/doclog", "--clickhouse-url", "clickhouse://127.0.0.1:9/db?secure=maybe"}, "secure", ""},
		{[]string{"--database-url", "postgres://doclog@127.0.0.1:9/doclog", "--auth-read-tokens", strings.Repeat("r", 40) + "," + shortToken},
			"--auth-read-tokens: the token at index 1 (0-based) is 18 characters long; a token needs at least 32", shortToken},
	} {
		code, stderr := runToExit(t, exec.Command(bin, append([]string{"serve", "--ops-addr", "127.0.0.1:0", "--kafka-seeds", "127.0.0.1:9"}, c.args...)...), 30*time.Second)
		require.Equal(t, 1, code, "%v: %s", c.args, stderr)
		require.Contains(t, stderr, c.want)
		if c.hidden != "" {
			require.NotContains(t, stderr, c.hidden)
		}
	}
}

// serveProc is a `doclog serve` process whose JSON log lines the test reads.
type serveProc struct {
	cmd    *exec.Cmd
	exited chan error
	ops    string
	mu     sync.Mutex
	logs   []map[string]any
	stderr bytes.Buffer
	ended  bool
}

func startServe(t *testing.T, bin string, args ...string) *serveProc {
	t.Helper()
	p := &serveProc{exited: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"serve", "--ops-addr", "127.0.0.1:0", "--retention-job-results", "0"}, args...)...)
	p.cmd.Env = serveEnv()
	pipe, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var entry map[string]any
			p.mu.Lock()
			p.stderr.Write(append(sc.Bytes(), '\n'))
			if json.Unmarshal(sc.Bytes(), &entry) == nil {
				p.logs = append(p.logs, entry)
			}
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pipe)
		err := p.cmd.Wait()
		p.mu.Lock()
		p.ended = true
		p.mu.Unlock()
		p.exited <- err
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		ended := p.ended
		p.mu.Unlock()
		if !ended {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	p.ops = p.awaitLog(t, "operator endpoints listening", time.Minute)["addr"].(string)
	return p
}

// serveEnv is the test's environment without the settings `doclog serve`
// would read from it.
func serveEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DOCLOG_") && !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "CLICKHOUSE_URL=") {
			env = append(env, kv)
		}
	}
	return env
}

func (p *serveProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// awaitLog returns the first log entry with the message msg.
func (p *serveProc) awaitLog(t *testing.T, msg string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		p.mu.Lock()
		for _, e := range p.logs {
			if e["msg"] == msg {
				p.mu.Unlock()
				return e
			}
		}
		ended := p.ended
		p.mu.Unlock()
		if ended || !time.Now().Before(deadline) {
			t.Fatalf("doclog serve logged no %q within %s:\n%s", msg, within, p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type reply struct {
	code int
	body string
}

func (p *serveProc) get(t *testing.T, path string) reply {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + p.ops + path)
	require.NoError(t, err, "GET %s:\n%s", path, p.output())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, string(body)}
}

// awaitReadyz polls /readyz until it answers code with every want in its
// body.
func (p *serveProc) awaitReadyz(t *testing.T, code int, within time.Duration, want ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := p.get(t, "/readyz")
		ok := r.code == code
		for _, w := range want {
			ok = ok && strings.Contains(r.body, w)
		}
		if ok {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("/readyz did not answer %d with %q within %s; last %d %s\n%s", code, want, within, r.code, r.body, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// requireStops sends SIGTERM and requires a clean exit within the time
// given.
func (p *serveProc) requireStops(t *testing.T, within time.Duration) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.exited:
		require.NoError(t, err, "doclog serve must exit cleanly on SIGTERM:\n%s", p.output())
	case <-time.After(within):
		t.Fatalf("doclog serve did not stop within %s of SIGTERM:\n%s", within, p.output())
	}
}

func submitDocument(t *testing.T, ingestURL string) (jobID string) {
	t.Helper()
	resp, err := testenv.Admitted(t, func() (*http.Response, error) {
		return http.Post(ingestURL+"/v1/documents", "application/json",
			strings.NewReader(`{"documentType":"doclog/json","name":"waited","actions":[{"type":"MERGE_PATCH","scope":"global","input":{"greeting":"hi"}}]}`))
	})
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	var accepted struct{ JobID string }
	require.NoError(t, json.Unmarshal(body, &accepted))
	return accepted.JobID
}

// buildDoclog builds the command into a directory of the test's.
func buildDoclog(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "doclog")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/doclog")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	return bin
}
