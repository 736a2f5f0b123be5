package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Defaults of ServerConfig's connection bounds.
const (
	// DefaultReadTimeout bounds reading a whole request, body included: a
	// body that trickles in must not hold a connection and its goroutine
	// for ever (net/http reads the body before a handler's 401 goes out).
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the end of its answer. An API that holds requests open (long polls,
	// consistency waits) sets it above its longest wait.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection that carries no
	// request for this long.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxHeaderBytes bounds a request's headers (net/http's own
	// default is 1 MiB; doclog's requests carry a bearer token and a few
	// short headers).
	DefaultMaxHeaderBytes = 64 << 10
)

// ServerConfig configures a Server. Zero bounds take their defaults.
type ServerConfig struct {
	// Name names the API in errors and logs ("ingest", "read store").
	Name string
	// Addr is the address to listen on.
	Addr string
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout, WriteTimeout, IdleTimeout and MaxHeaderBytes bound a
	// connection as net/http's Server fields of those names do. Defaults
	// DefaultReadTimeout, DefaultWriteTimeout, DefaultIdleTimeout,
	// DefaultMaxHeaderBytes.
	ReadTimeout    time.Duration
	WriteTimeout   time.Duration
	IdleTimeout    time.Duration
	MaxHeaderBytes int
	// ShutdownTimeout bounds a graceful Stop whose context has no deadline.
	ShutdownTimeout time.Duration
	// TLS, if not nil, makes the server serve HTTPS only, with this
	// configuration (see internal/certfile for one read from files).
	// Default nil: plain HTTP.
	TLS *tls.Config
}

// WithDefaults returns a copy with every unset bound at its default.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return c
}

// WaitMargin is what an API that holds requests open adds to its longest
// wait for WriteTimeout: the time to answer once the wait ends.
const WaitMargin = 15 * time.Second

// NewHTTPServer is an http.Server of handler with the configuration's
// bounds, for the servers that do not need Server's lifecycle (the
// operator endpoints).
func NewHTTPServer(cfg ServerConfig, handler http.Handler, logger *zap.Logger) *http.Server {
	cfg = cfg.WithDefaults()
	if logger == nil {
		logger = zap.NewNop()
	}
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          zap.NewStdLog(logger.Named("http")),
		// A clone: ServeTLS adds the HTTP/2 protocol to the config it is
		// given, and one config may serve several servers.
		TLSConfig: cfg.TLS.Clone(),
	}
}

// Serve serves srv on ln, over TLS when srv has a TLS configuration (as
// NewHTTPServer gives it from ServerConfig.TLS).
func Serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// Server serves a handler with a start/stop lifecycle.
type Server struct {
	cfg     ServerConfig
	handler http.Handler
	onStop  func()
	logger  *zap.Logger

	mu      sync.Mutex
	started bool
	stopped bool
	srv     *http.Server
	ln      net.Listener
	served  chan error // the result of Serve, once it returns
}

// NewServer returns a server of handler; nothing listens until Start.
// onStop, if not nil, runs first in Stop: the API answers the requests it
// holds open (long polls, waits) before the server drains.
func NewServer(cfg ServerConfig, handler http.Handler, onStop func(), logger *zap.Logger) *Server {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Server{cfg: cfg, handler: handler, onStop: onStop, logger: logger}
}

// Start listens and serves in the background. It fails if the address cannot
// be bound, or if the server was started or stopped before.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return fmt.Errorf("%s server: already started or stopped", s.cfg.Name)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return &ListenError{Server: s.cfg.Name, Addr: s.cfg.Addr, Err: err}
	}
	s.started = true
	s.ln = ln
	s.srv = NewHTTPServer(s.cfg, s.handler, s.logger)
	s.served = make(chan error, 1)
	go func() {
		err := Serve(s.srv, ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.served <- err
	}()
	s.logger.Info(s.cfg.Name+" listening", zap.String("addr", ln.Addr().String()), zap.Bool("tls", s.cfg.TLS != nil))
	return nil
}

// Addr is the address the server listens on (useful with port 0), or nil
// before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Stop shuts down gracefully: onStop runs, then the server stops accepting
// and waits for in-flight requests until ctx ends, or ShutdownTimeout when
// ctx has no deadline; what is still open then is cut. Stopping twice, or a
// server never started, is harmless.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	srv, served := s.srv, s.served
	s.mu.Unlock()

	if s.onStop != nil {
		s.onStop()
	}
	if srv == nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok && s.cfg.ShutdownTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		defer cancel()
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		// Out of time: cut the remaining connections rather than leave
		// them to a process that is going away.
		_ = srv.Close()
		err = fmt.Errorf("%s server: graceful shutdown: %w", s.cfg.Name, err)
	}
	if serveErr := <-served; serveErr != nil && err == nil {
		err = fmt.Errorf("%s server: serve: %w", s.cfg.Name, serveErr)
	}
	s.logger.Info(s.cfg.Name + " stopped")
	return err
}
