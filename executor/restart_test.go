package executor_test

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/executor"
)

// Postgres restarts in the middle of a run: the member pauses and reports
// not ready while it is down, and once it is back every job completes;
// nothing is dead-lettered or failed because of the restart.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	cluster := startCluster(t)
	px := newProxy(t, cluster.addr)
	b := setupWithURL(t, "postgres://postgres@"+px.addr()+"/postgres?sslmode=disable", 4)
	core, logs := observer.New(zap.InfoLevel)
	cfg := b.config()
	cfg.Logger = zap.New(zapcore.NewTee(cfg.Logger.Core(), core))
	m := b.start(cfg)

	const docs, perDoc = 20, 10
	all, perDocJobs := interleaved(docs, perDoc)
	half := len(all) / 2
	b.submit(all[:half]...)
	b.waitResults(ids(all[:half]), 30*time.Second)

	cluster.stop()
	b.submit(all[half:]...)
	// Stay down a while, so the member retries against refused
	// connections, not only the ones the shutdown broke.
	waitFor(t, 30*time.Second, "the member reports the outage for a second", func() bool {
		var ue *executor.UnavailableError
		return errors.As(m.e.Ready(), &ue) && time.Since(ue.Since) > time.Second
	})
	px.setBackend(cluster.start())

	b.requireAllApplied(all, perDocJobs, docs, 60*time.Second)
	waitFor(t, 30*time.Second, "the member is ready again", func() bool { return m.e.Ready() == nil })
	require.Zero(t, logs.FilterMessage("job retries after a transient error").Len(), "the outage was never counted against a job")
	require.Positive(t, logs.FilterMessage("dependency available again: fetching resumed").Len())
	b.requireNoDeadLetters()
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pgCluster is a Postgres cluster of the test's own, run by scripts/pg.sh,
// so the test can stop and start it. Its port changes at every start.
type pgCluster struct {
	t      *testing.T
	script string
	dir    string
	addr   string
}

func startCluster(t *testing.T) *pgCluster {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	// The cluster runs as the postgres user when the test runs as root: it
	// must be able to reach its directory.
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	c := &pgCluster{t: t, script: filepath.Join(root, "scripts", "pg.sh"), dir: filepath.Join(dir, "pg")}
	c.addr = c.start()
	t.Cleanup(c.stop)
	return c
}

// repoRoot is the repository's root, where the scripts are.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return root
		}
		parent := filepath.Dir(root)
		require.NotEqual(t, parent, root, "no go.mod above the test's directory")
		root = parent
	}
}

// start starts the cluster and returns its host:port.
func (c *pgCluster) start() string {
	c.t.Helper()
	out, err := exec.Command(c.script, "start", c.dir).Output()
	require.NoError(c.t, err, "scripts/pg.sh start")
	for _, line := range strings.Split(string(out), "\n") {
		if u, ok := strings.CutPrefix(line, "DATABASE_URL=postgres://postgres@"); ok {
			return strings.SplitN(u, "/", 2)[0]
		}
	}
	c.t.Fatalf("scripts/pg.sh start printed no DATABASE_URL: %s", out)
	return ""
}

func (c *pgCluster) stop() {
	if out, err := exec.Command(c.script, "stop", c.dir).CombinedOutput(); err != nil {
		c.t.Errorf("scripts/pg.sh stop: %v: %s", err, out)
	}
}

// proxy forwards TCP connections to a backend that can move, so clients
// keep one address across a restart that changes the server's port.
type proxy struct {
	ln      net.Listener
	mu      sync.Mutex
	backend string
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

func newProxy(t *testing.T, backend string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) setBackend(addr string) {
	p.mu.Lock()
	p.backend = addr
	p.mu.Unlock()
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		backend := p.backend
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c, backend) })
	}
}

func (p *proxy) pipe(c net.Conn, backend string) {
	defer p.forget(c)
	s, err := net.DialTimeout("tcp", backend, 2*time.Second)
	if err != nil {
		return
	}
	defer s.Close()
	p.mu.Lock()
	p.conns[s] = struct{}{}
	p.mu.Unlock()
	defer p.forget(s)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
	c.Close()
	s.Close()
	<-done
}

func (p *proxy) forget(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
