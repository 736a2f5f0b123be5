package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Services are the run's own broker, Postgres and ClickHouse. The run kills
// and restarts the first two, which is why they can never be shared ones.
type Services struct {
	root, dir string
	// KafkaSeeds is the broker's own listener; KafkaProxied is the listener
	// that advertises the broker proxy's address (DIR/proxied of kafka.sh).
	KafkaSeeds, KafkaProxied string
	DatabaseURL              string
	ClickHouseAddr           string
	ownClickHouse            bool
}

// StartServices starts the services under dir, side by side since the JVM's
// start dominates. proxyAddr is the address the broker's second listener
// advertises. With clickHouseAddr set, that server is used instead of one of
// the run's own (it is never restarted).
func StartServices(ctx context.Context, root, dir, proxyAddr, clickHouseAddr string) (*Services, error) {
	s := &Services{root: root, dir: dir, ClickHouseAddr: clickHouseAddr, ownClickHouse: clickHouseAddr == ""}
	// initdb runs as the postgres user when we are root: it must reach DIR.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("opening the run directory to postgres: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Add(3)
	go func() {
		defer wg.Done()
		errs[0] = s.startKafka(ctx, proxyAddr)
	}()
	go func() {
		defer wg.Done()
		out, err := s.script(ctx, nil, "pg.sh", "start", s.pgDir(), "fsync")
		if err == nil {
			s.DatabaseURL, err = lastValue(out, "DATABASE_URL=")
		}
		errs[1] = err
	}()
	go func() {
		defer wg.Done()
		if !s.ownClickHouse {
			return
		}
		out, err := s.script(ctx, nil, "clickhouse.sh", "start", filepath.Join(dir, "clickhouse"))
		if err == nil {
			s.ClickHouseAddr, err = lastValue(out, "TEST_CLICKHOUSE_ADDR=")
		}
		errs[2] = err
	}()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Services) startKafka(ctx context.Context, proxyAddr string) error {
	if _, err := s.script(ctx, nil, "kafka.sh", "install"); err != nil {
		return err
	}
	out, err := s.script(ctx, []string{"KAFKA_PROXIED_ADVERTISE=" + proxyAddr}, "kafka.sh", "start", s.kafkaDir())
	if err != nil {
		return err
	}
	if s.KafkaSeeds, err = lastValue(out, "TEST_KAFKA_SEEDS="); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(s.kafkaDir(), "proxied"))
	if err != nil {
		return fmt.Errorf("reading the broker's proxied listener: %w", err)
	}
	s.KafkaProxied = strings.TrimSpace(string(b))
	return nil
}

func (s *Services) kafkaDir() string { return filepath.Join(s.dir, "kafka") }
func (s *Services) pgDir() string    { return filepath.Join(s.dir, "pg") }

// KillBroker sends SIGKILL to the broker: no controlled shutdown, no flush.
func (s *Services) KillBroker() error {
	b, err := os.ReadFile(filepath.Join(s.kafkaDir(), "kafka.pid"))
	if err != nil {
		return fmt.Errorf("reading the broker's pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("parsing the broker's pid: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing the broker: %w", err)
	}
	return nil
}

// RestartBroker starts the broker again on its storage and ports.
func (s *Services) RestartBroker(ctx context.Context) error {
	_, err := s.script(ctx, nil, "kafka.sh", "restart", s.kafkaDir())
	return err
}

// CrashPostgres restarts Postgres in immediate mode: every backend dies
// without a checkpoint and the server recovers from its WAL.
func (s *Services) CrashPostgres(ctx context.Context) error {
	_, err := s.script(ctx, nil, "pg.sh", "restart", s.pgDir(), "immediate")
	return err
}

// Stop stops every service the run started, each with a fresh deadline so a
// cancelled run still cleans up.
func (s *Services) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = s.script(ctx, nil, "kafka.sh", "stop", s.kafkaDir())
	_, _ = s.script(ctx, nil, "pg.sh", "stop", s.pgDir())
	if s.ownClickHouse {
		_, _ = s.script(ctx, nil, "clickhouse.sh", "stop", filepath.Join(s.dir, "clickhouse"))
	}
}

// script runs scripts/NAME and returns its stdout; its stderr goes to
// DIR/scripts.log, and its tail into the error when it fails.
func (s *Services) script(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(s.root, "scripts", name)}, args...)...)
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	appendFile(filepath.Join(s.dir, "scripts.log"), fmt.Sprintf("== %s %s\n%s", name, strings.Join(args, " "), stderr.String()))
	if err != nil {
		return "", fmt.Errorf("scripts/%s %s: %w: %s", name, strings.Join(args, " "), err, tail(stderr.String(), 1500))
	}
	return stdout.String(), nil
}

// lastValue finds the value of the last PREFIX=value line a script printed.
func lastValue(out, prefix string) (string, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), prefix); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("finding %s in the script's output %q", prefix, out)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func appendFile(path, text string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(text)
}
