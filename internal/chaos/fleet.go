package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Member is one logical member of the fleet: a name that stays across its
// restarts (the static membership name) and the process currently running
// under it, if any.
type Member struct {
	Name    string // role-n, also DOCLOG_MEMBER_NAME
	Role    string
	OpsAddr string
	APIAddr string   // ingest and readstore only
	Env     []string // DOCLOG_* settings of this member

	fleet *Fleet
	log   string

	mu      sync.Mutex
	run     *process
	retired bool // stopped for good: no restart, expected or not
	starts  int
}

type process struct {
	cmd      *exec.Cmd
	done     chan struct{}
	expected bool // the harness ended it
}

// Exit is an exit of a member's process that the harness did not cause.
type Exit struct {
	Member string
	At     time.Time
	Status string
	Tail   string // the last lines of its log
}

// Fleet runs members as `doclog serve` processes, each in a process group of
// its own so a kill reaches everything it started. Like a container runtime
// it restarts a process that exits on its own, and keeps the exit for the
// report.
type Fleet struct {
	binary string
	dir    string
	base   []string
	logf   func(string, ...any)

	mu      sync.Mutex
	members []*Member
	exits   []Exit
	closing bool
}

// NewFleet prepares a fleet of binary logging under dir. base is the
// environment every member shares.
func NewFleet(binary, dir string, base []string, logf func(string, ...any)) *Fleet {
	_ = os.MkdirAll(filepath.Join(dir, "pids"), 0o755)
	return &Fleet{binary: binary, dir: dir, base: base, logf: logf}
}

// Add registers a member without starting it.
func (f *Fleet) Add(m *Member) *Member {
	m.fleet = f
	m.log = filepath.Join(f.dir, m.Name+".log")
	f.mu.Lock()
	f.members = append(f.members, m)
	f.mu.Unlock()
	return m
}

// Exits lists the unexpected exits so far.
func (f *Fleet) Exits() []Exit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Exit(nil), f.exits...)
}

// Start launches the member's process if none runs.
func (m *Member) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.run != nil || m.retired {
		return nil
	}
	lf, err := os.OpenFile(m.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening the log of %s: %w", m.Name, err)
	}
	defer lf.Close()
	m.starts++
	fmt.Fprintf(lf, "=== chaos: start %d of %s at %s\n", m.starts, m.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(m.fleet.binary, "serve", "--roles="+m.Role)
	cmd.Env = append(append(cleanEnv(), m.fleet.base...), m.Env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", m.Name, err)
	}
	// For scripts/chaos.sh, which kills what is left if the harness itself
	// dies.
	_ = os.WriteFile(filepath.Join(m.fleet.dir, "pids", m.Name+".pid"), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644)
	p := &process{cmd: cmd, done: make(chan struct{})}
	m.run = p
	go m.watch(p)
	return nil
}

// watch waits for the process and restarts it, after a pause, when it ended
// by itself.
func (m *Member) watch(p *process) {
	err := p.cmd.Wait()
	m.mu.Lock()
	m.run = nil
	expected := p.expected || m.retired
	m.mu.Unlock()
	close(p.done)
	if expected {
		return
	}
	status := "exit 0"
	if err != nil {
		status = err.Error()
	}
	f := m.fleet
	f.mu.Lock()
	f.exits = append(f.exits, Exit{Member: m.Name, At: time.Now(), Status: status, Tail: logTail(m.log, 6)})
	closing := f.closing
	f.mu.Unlock()
	f.logf("UNEXPECTED EXIT of %s (%s); restarting it in 1s", m.Name, status)
	if closing {
		return
	}
	time.Sleep(time.Second)
	if err := m.Start(); err != nil {
		f.logf("restarting %s: %v", m.Name, err)
	}
}

// Kill sends SIGKILL to the member's process group and waits for it to end.
func (m *Member) Kill() { m.signal(syscall.SIGKILL, 0) }

// Stop ends the member gracefully (SIGTERM, then SIGKILL after grace) and
// keeps it down.
func (m *Member) Stop(grace time.Duration) {
	m.mu.Lock()
	m.retired = true
	m.mu.Unlock()
	m.signal(syscall.SIGTERM, grace)
}

// Revive lets a stopped member start again.
func (m *Member) Revive() error {
	m.mu.Lock()
	m.retired = false
	m.mu.Unlock()
	return m.Start()
}

func (m *Member) signal(sig syscall.Signal, grace time.Duration) {
	m.mu.Lock()
	p := m.run
	if p != nil {
		p.expected = true
	}
	m.mu.Unlock()
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	if sig == syscall.SIGKILL {
		<-p.done
		return
	}
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// WaitReady polls the member's /readyz until it answers 200.
func (m *Member) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.OpsAddr+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w; its log ends:\n%s", m.Name, timeout, ctx.Err(), logTail(m.log, 10))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// StopAll ends every member, whatever state it is in; nothing is restarted
// after it.
func (f *Fleet) StopAll(grace time.Duration) {
	f.mu.Lock()
	f.closing = true
	members := append([]*Member(nil), f.members...)
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func() { defer wg.Done(); m.Stop(grace) }()
	}
	wg.Wait()
}

// cleanEnv is the harness's environment without doclog's own settings, so a
// developer's DOCLOG_* or DATABASE_URL cannot leak into a member.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DOCLOG_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "CLICKHOUSE_URL=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// logTail returns the last n lines of a log file.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
