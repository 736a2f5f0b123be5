// Package localpg runs a local Postgres server for `doclog dev` and `make
// run`: it finds Debian's server binaries, initialises a cluster in a data
// directory on first use, starts it on a loopback port and stops it. Run as
// root, the cluster belongs to the "postgres" user, because initdb refuses to
// run as root.
package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// Config says where the cluster lives and how it runs.
type Config struct {
	// DataDir holds the cluster (DataDir/data) and its log. Required. It is
	// kept between runs: a second Start reuses the cluster.
	DataDir string
	// Port is the TCP port on 127.0.0.1; 0 (the default) picks a free one.
	Port int
	// Fsync turns durability on (default off: a development cluster trades
	// crash safety for speed).
	Fsync bool
	// BinDir holds initdb and pg_ctl; empty (the default) searches
	// /usr/lib/postgresql/*/bin, newest version first, then PATH.
	BinDir string
	// StartTimeout bounds initdb plus start; default 60s.
	StartTimeout time.Duration
}

// WithDefaults returns the config with defaults filled in.
func (c Config) WithDefaults() Config {
	if c.StartTimeout == 0 {
		c.StartTimeout = 60 * time.Second
	}
	return c
}

// Validate reports a config that cannot work.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("localpg: a data directory is required")
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("localpg: port %d is out of range", c.Port)
	}
	return nil
}

// Server is a running local cluster.
type Server struct {
	cfg  Config
	bin  string
	port int
	own  *user.User // the cluster owner when running as root
}

// ErrNoPostgres reports that no Postgres server binaries were found.
var ErrNoPostgres = errors.New("no Postgres server binaries found: install Debian's postgresql package (apt-get install postgresql) or set DATABASE_URL")

// FindBinDir returns the directory holding initdb and pg_ctl.
func FindBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNoPostgres
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start initialises the cluster if DataDir has none, and starts it.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	s := &Server{cfg: cfg, bin: cfg.BinDir, port: cfg.Port}
	if s.bin == "" {
		var err error
		if s.bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	if err := s.prepareDir(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(s.dataDir(), "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := s.run(ctx, "initdb", "-D", s.dataDir(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"); err != nil {
			return nil, fmt.Errorf("initialising a Postgres cluster in %s: %w", s.dataDir(), err)
		}
	}
	// A cluster left running by a killed process holds the port and pid
	// file; stop it first so this start owns it.
	_ = s.run(ctx, "pg_ctl", "-D", s.dataDir(), "-m", "fast", "-w", "stop")
	if s.port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		s.port = p
	}
	fsync := "off"
	if cfg.Fsync {
		fsync = "on"
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c fsync=%s -c synchronous_commit=%s -c max_connections=200 -c max_locks_per_transaction=1024",
		s.port, s.cfg.DataDir, fsync, fsync)
	if err := s.run(ctx, "pg_ctl", "-D", s.dataDir(), "-l", filepath.Join(cfg.DataDir, "server.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		return nil, fmt.Errorf("starting Postgres in %s (log: %s): %w", s.dataDir(), filepath.Join(cfg.DataDir, "server.log"), err)
	}
	return s, nil
}

// URL is the server's connection string for the postgres database.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Stop shuts the server down (fast mode: open transactions roll back).
// Stopping a stopped server is harmless.
func (s *Server) Stop(ctx context.Context) error {
	if err := s.run(ctx, "pg_ctl", "-D", s.dataDir(), "-m", "fast", "-w", "stop"); err != nil {
		if _, statErr := os.Stat(filepath.Join(s.dataDir(), "postmaster.pid")); errors.Is(statErr, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("stopping Postgres in %s: %w", s.dataDir(), err)
	}
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.cfg.DataDir, "data") }

// prepareDir creates DataDir and, as root, hands it to the postgres user.
func (s *Server) prepareDir() error {
	if err := os.MkdirAll(s.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", s.cfg.DataDir, err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs the postgres user (created by Debian's postgresql package): %w", err)
	}
	s.own = u
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(s.cfg.DataDir, uid, gid); err != nil {
		return fmt.Errorf("handing %s to the postgres user: %w", s.cfg.DataDir, err)
	}
	return nil
}

// run runs a server binary, as the postgres user when we are root.
func (s *Server) run(ctx context.Context, name string, args ...string) error {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.own != nil {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", s.own.Username, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
