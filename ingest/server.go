package ingest

import (
	"github.com/doclog/doclog/internal/httpapi"
)

// Server serves the Handler over HTTP on Config.Addr. Start, Addr and Stop
// come from httpapi.Server.
// Stop shuts down gracefully: long-polling clients are answered at once with
// their job's current status, /readyz fails, then the server stops accepting
// and waits for in-flight requests (a submit waiting for the broker's
// acknowledgement finishes) until ctx ends, or Config.ShutdownTimeout when
// ctx has no deadline. Stopping twice, or a server never started, is
// harmless (httpapi.Server.Stop).
type Server struct {
	*httpapi.Server
	handler *Handler
}

// NewServer builds a server and its handler; nothing listens until Start.
func NewServer(cfg Config, deps Deps) (*Server, error) {
	h, err := NewHandler(cfg, deps)
	if err != nil {
		return nil, err
	}
	srv := httpapi.NewServer(httpapi.ServerConfig{
		Name:              "ingest",
		Addr:              h.cfg.Addr,
		ReadHeaderTimeout: h.cfg.ReadHeaderTimeout,
		ShutdownTimeout:   h.cfg.ShutdownTimeout,
	}, h, h.Close, h.logger)
	return &Server{Server: srv, handler: h}, nil
}

// Handler returns the server's handler.
func (s *Server) Handler() *Handler { return s.handler }
