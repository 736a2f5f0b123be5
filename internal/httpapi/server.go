package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Name names the API in errors and logs ("ingest", "read store").
	Name string
	// Addr is the address to listen on.
	Addr string
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ShutdownTimeout bounds a graceful Stop whose context has no deadline.
	ShutdownTimeout time.Duration
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
		return fmt.Errorf("%s server: listen on %s: %w", s.cfg.Name, s.cfg.Addr, err)
	}
	s.started = true
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ErrorLog:          zap.NewStdLog(s.logger.Named("http")),
	}
	s.served = make(chan error, 1)
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.served <- err
	}()
	s.logger.Info(s.cfg.Name+" listening", zap.String("addr", ln.Addr().String()))
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
