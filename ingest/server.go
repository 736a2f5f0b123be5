package ingest

import (
	"context"
	"net"

	"github.com/doclog/doclog/internal/httpapi"
)

// Server serves the API on Config.Addr: Start listens and serves in the
// background, Addr is where (useful with port 0), and Stop first closes the
// handler, which answers the requests it holds open, then drains the rest
// within its context (or Config.ShutdownTimeout).
type Server struct {
	srv *httpapi.Server
}

// Start listens and serves in the background. It fails if the address
// cannot be bound (a *net.OpError inside), or if the server was started or
// stopped before.
func (s *Server) Start(ctx context.Context) error { return s.srv.Start(ctx) }

// Addr is the address the server listens on, or nil before Start.
func (s *Server) Addr() net.Addr { return s.srv.Addr() }

// Stop shuts the server down gracefully; stopping twice, or a server never
// started, is harmless.
func (s *Server) Stop(ctx context.Context) error { return s.srv.Stop(ctx) }

// NewServer builds the handler and a server for it on Config.Addr; nothing
// listens until Start.
func NewServer(cfg Config, deps Deps) (*Server, error) {
	h, err := NewHandler(cfg, deps)
	if err != nil {
		return nil, err
	}
	sc := httpapi.ServerConfig{Name: "ingest", Addr: h.cfg.Addr, ReadHeaderTimeout: h.cfg.ReadHeaderTimeout,
		// Long polls and consistency waits are held open up to MaxWait.
		WriteTimeout: h.cfg.MaxWait + httpapi.WaitMargin, ShutdownTimeout: h.cfg.ShutdownTimeout,
		TLS: h.cfg.TLS}
	return &Server{srv: httpapi.NewServer(sc, h, h.Close, h.logger)}, nil
}
