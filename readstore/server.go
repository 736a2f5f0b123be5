package readstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"go.uber.org/zap"
)

// Server serves the Handler over HTTP on Config.Addr.
type Server struct {
	cfg     Config
	handler *Handler
	logger  *zap.Logger

	mu      sync.Mutex
	started bool
	stopped bool
	srv     *http.Server
	ln      net.Listener
	served  chan error // the result of Serve, once it returns
}

// NewServer builds a server and its handler; nothing listens until Start.
func NewServer(cfg Config, deps Deps) (*Server, error) {
	h, err := NewHandler(cfg, deps)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: h.cfg, handler: h, logger: h.logger}, nil
}

// Handler returns the server's handler.
func (s *Server) Handler() *Handler { return s.handler }

// Start listens and serves in the background. It fails if the address
// cannot be bound, or if the server was started (or stopped) before.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return errors.New("read store server: already started or stopped")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("read store server: listen on %s: %w", s.cfg.Addr, err)
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
	s.logger.Info("read store listening", zap.String("addr", ln.Addr().String()))
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

// Stop shuts down gracefully: reads waiting for a consistency token are
// answered 503 at once, /readyz fails, then the server stops accepting and
// waits for in-flight requests until ctx ends, or Config.ShutdownTimeout
// when ctx has no deadline. Stopping twice, or a server never started, is
// harmless.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	srv, served := s.srv, s.served
	s.mu.Unlock()

	s.handler.Close()
	if srv == nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		defer cancel()
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		// Out of time: cut the remaining connections rather than leave
		// them to a process that is going away.
		_ = srv.Close()
		err = fmt.Errorf("read store server: graceful shutdown: %w", err)
	}
	if serveErr := <-served; serveErr != nil && err == nil {
		err = fmt.Errorf("read store server: serve: %w", serveErr)
	}
	s.logger.Info("read store stopped")
	return err
}
