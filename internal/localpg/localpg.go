// Package localpg runs a local Postgres server for `doclog dev` and `make
// run`: it finds Debian's server binaries, initialises a cluster with
// password authentication on first use, starts it on a loopback port and
// stops it.
//
// No path reaches a shell: pg_ctl runs the server through /bin/sh with the
// options it is given, so the data directory goes to it in PGDATA, the server
// log through an inherited file, and the Unix socket is off (clients connect
// over TCP), which lets any directory name work, spaces and `$(…)` included.
//
// Run as root, the cluster belongs to the postgres user, since initdb refuses
// to run as root. It then lives in a directory of that user's home, created by
// that user: localpg changes no owner and no mode of any existing file or
// directory, so a symbolic link planted in a shared directory cannot hand
// anything to the postgres user, and the caller's data directory may stay
// private to root.
package localpg

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config says where the cluster lives and how it runs.
type Config struct {
	// DataDir holds the server's log (server.log) and, when not running as
	// root, the cluster (DataDir/data) and its password file. Required.
	// PrivateDir creates it and refuses one that others could reach. It is
	// kept between runs: a second Start reuses the cluster.
	DataDir string
	// Port is the TCP port on 127.0.0.1; 0 (the default) picks a free one.
	Port int
	// Fsync turns durability on (default off: a development cluster trades
	// crash safety for speed).
	Fsync bool
	// BinDir holds initdb and pg_ctl; empty (the default) searches
	// /usr/lib/postgresql/*/bin, newest version first, then PATH. pg_ctl
	// quotes it for its shell, so it must not hold ", $, ` or \.
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
	if strings.ContainsAny(c.BinDir, "\"$`\\") {
		return fmt.Errorf("localpg: the binary directory %q holds a character pg_ctl's shell would interpret", c.BinDir)
	}
	return nil
}

// Server is a running local cluster.
type Server struct {
	cfg      Config
	bin      string
	port     int
	password string
	// owner is the postgres user when running as root, nil otherwise.
	owner *user.User
	// home is the directory the cluster's owner controls (DataDir, or the
	// postgres user's home), cluster the cluster's directory under it.
	home    string
	cluster string
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

// PrivateDir creates dir, and the parents it lacks, for this user alone
// (0700), and accepts an existing one only when it is a real directory of
// this user's that no one else can enter. It changes no mode or owner of an
// existing directory, dir or parent: what it refuses, it says how to fix.
func PrivateDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("resolving the data directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fmt.Errorf("creating the data directory %s: %w", abs, err)
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return fmt.Errorf("checking the data directory %s: %w", abs, err)
	}
	switch st, _ := fi.Sys().(*syscall.Stat_t); {
	case fi.Mode()&os.ModeSymlink != 0:
		target, _ := filepath.EvalSymlinks(abs)
		return fmt.Errorf("refusing the data directory %s: it is a symbolic link (to %s); give a real directory of your own", abs, target)
	case !fi.IsDir():
		return fmt.Errorf("refusing the data directory %s: it is not a directory", abs)
	case st != nil && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("refusing the data directory %s: it belongs to uid %d, not to this user (uid %d); give a directory of your own", abs, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("refusing the data directory %s: other users can enter it (mode %04o); run chmod 700 %s, or give another directory", abs, fi.Mode().Perm(), abs)
	}
	return nil
}

// Start initialises the cluster if there is none, and starts it.
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
	if err := PrivateDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := s.place(ctx); err != nil {
		return nil, err
	}
	if err := s.initOnce(ctx); err != nil {
		return nil, err
	}
	// A cluster left running by a killed process holds the port and pid
	// file; stop it first so this start owns it.
	_ = s.run(ctx, nil, s.tool("pg_ctl"), "-m", "fast", "-w", "stop")
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
	// pg_ctl hands these to a shell: they hold no path, only constants and
	// a number.
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories= -c fsync=%s -c synchronous_commit=%s -c max_connections=200 -c max_locks_per_transaction=1024",
		s.port, fsync, fsync)
	logPath := s.LogFile()
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the Postgres log: %w", err)
	}
	defer logFile.Close()
	if err := s.run(ctx, logFile, s.tool("pg_ctl"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		return nil, fmt.Errorf("starting Postgres in %s: %w; the end of %s:\n%s", s.dataDir(), err, logPath, tail(logPath, 2048))
	}
	return s, nil
}

// place decides where the cluster lives. As root that is
// doclog-dev/<digest of DataDir> in the postgres user's home, made by that
// user, so that no directory on the way to DataDir has to let it in.
func (s *Server) place(ctx context.Context) error {
	abs, err := filepath.Abs(s.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("resolving the data directory %s: %w", s.cfg.DataDir, err)
	}
	if os.Geteuid() != 0 {
		s.home, s.cluster = abs, "."
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs the postgres user (created by Debian's postgresql package): %w", err)
	}
	if fi, err := os.Stat(u.HomeDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("running as root, doclog keeps the Postgres cluster in the postgres user's home %s, which is not a directory: create it for that user, run as another user, or set DATABASE_URL", u.HomeDir)
	}
	sum := sha256.Sum256([]byte(abs))
	s.owner, s.home, s.cluster = u, u.HomeDir, filepath.Join("doclog-dev", hex.EncodeToString(sum[:8]))
	if err := s.run(ctx, nil, "mkdir", "-p", "-m", "0700", "--", s.Dir()); err != nil {
		return fmt.Errorf("creating the cluster's directory as the postgres user: %w", err)
	}
	return nil
}

// initOnce initialises a cluster with password authentication, with a
// new password in its password file, unless it exists; then it reads the
// password.
func (s *Server) initOnce(ctx context.Context) error {
	home, err := os.OpenRoot(s.home)
	if err != nil {
		return fmt.Errorf("opening %s: %w", s.home, err)
	}
	defer home.Close()
	// The root confines every name under home: a symbolic link cannot lead
	// the password anywhere else.
	pwName := filepath.Join(s.cluster, "password")
	_, err = home.Stat(filepath.Join(s.cluster, "data", "PG_VERSION"))
	exists := err == nil
	if !exists {
		if err := s.newPassword(home, pwName); err != nil {
			return err
		}
		if err := s.run(ctx, nil, s.tool("initdb"), "-U", "postgres", "--auth=scram-sha-256", "--pwfile="+s.PasswordFile(), "-E", "UTF8", "--locale=C.UTF-8"); err != nil {
			return fmt.Errorf("initialising a Postgres cluster in %s: %w", s.dataDir(), err)
		}
	}
	pw, err := home.ReadFile(pwName)
	if errors.Is(err, os.ErrNotExist) && exists {
		return fmt.Errorf("the Postgres cluster in %s has no password file (an older doclog made it without authentication): remove %s to start a new cluster", s.dataDir(), s.Dir())
	}
	if err != nil {
		return fmt.Errorf("reading the Postgres password: %w", err)
	}
	s.password = strings.TrimSpace(string(pw))
	return nil
}

// newPassword writes a random password for the superuser into a new file
// only the cluster's owner can read. What a failed initialisation left is
// removed first, so the file is always one this call created.
func (s *Server) newPassword(home *os.Root, name string) error {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	if err := home.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing an earlier Postgres password file: %w", err)
	}
	f, err := home.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating the Postgres password file: %w", err)
	}
	defer f.Close()
	if s.owner != nil {
		uid, _ := strconv.Atoi(s.owner.Uid)
		gid, _ := strconv.Atoi(s.owner.Gid)
		// On the open file, not a path: nothing can be swapped in.
		if err := f.Chown(uid, gid); err != nil {
			return fmt.Errorf("handing the Postgres password file to the postgres user: %w", err)
		}
	}
	if _, err := f.WriteString(base64.RawURLEncoding.EncodeToString(b) + "\n"); err != nil {
		return fmt.Errorf("writing the Postgres password file: %w", err)
	}
	return f.Close()
}

// URL is the server's connection string for the postgres database, with
// the superuser's password.
func (s *Server) URL() string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", s.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Dir is the directory holding the cluster (data/) and its password file:
// DataDir, or as root a directory of the postgres user's home.
func (s *Server) Dir() string { return filepath.Join(s.home, s.cluster) }

// PasswordFile holds the superuser's password; only the cluster's owner (and
// root) can read it.
func (s *Server) PasswordFile() string { return filepath.Join(s.Dir(), "password") }

// LogFile is the server's log.
func (s *Server) LogFile() string { return filepath.Join(s.cfg.DataDir, "server.log") }

// Stop shuts the server down (fast mode: open transactions roll back).
// Stopping a stopped server is harmless.
func (s *Server) Stop(ctx context.Context) error {
	if err := s.run(ctx, nil, s.tool("pg_ctl"), "-m", "fast", "-w", "stop"); err != nil {
		if _, statErr := os.Stat(filepath.Join(s.dataDir(), "postmaster.pid")); errors.Is(statErr, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("stopping Postgres in %s: %w", s.dataDir(), err)
	}
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.Dir(), "data") }

func (s *Server) tool(name string) string { return filepath.Join(s.bin, name) }

// run runs a program for the cluster, as the postgres user when we are
// root, with PGDATA naming the cluster. Its output goes to out, or into the
// error when out is nil.
func (s *Server) run(ctx context.Context, out *os.File, prog string, args ...string) error {
	var cmd *exec.Cmd
	if s.owner != nil {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", s.owner.Username, "--", prog}, args...)...)
		cmd.Dir = s.home // a directory the postgres user may be in
	} else {
		cmd = exec.CommandContext(ctx, prog, args...)
	}
	cmd.Env = append(os.Environ(), "PGDATA="+s.dataDir())
	var buf bytes.Buffer
	if out != nil {
		// A file, not a pipe: the server pg_ctl starts keeps writing to it
		// after pg_ctl exits, and a pipe would keep Run waiting.
		cmd.Stdout, cmd.Stderr = out, out
	} else {
		cmd.Stdout, cmd.Stderr = &buf, &buf
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(prog), err, bytes.TrimSpace(buf.Bytes()))
	}
	return nil
}

// tail returns the last n bytes of a file, for an error message.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(bytes.TrimSpace(b))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
