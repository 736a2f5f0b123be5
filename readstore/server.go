package readstore

import (
	"github.com/doclog/doclog/internal/httpapi"
)

// NewServer builds the handler and a server for it on Config.Addr; nothing
// listens until Start. Stop first closes the handler, which answers the
// requests it holds open, then drains the rest (httpapi.Server).
func NewServer(cfg Config, deps Deps) (*httpapi.Server, error) {
	h, err := NewHandler(cfg, deps)
	if err != nil {
		return nil, err
	}
	sc := httpapi.ServerConfig{Name: "read store", Addr: h.cfg.Addr, ReadHeaderTimeout: h.cfg.ReadHeaderTimeout,
		// Long polls and consistency waits are held open up to MaxWait.
		WriteTimeout: h.cfg.MaxWait + httpapi.WaitMargin, ShutdownTimeout: h.cfg.ShutdownTimeout,
		TLS: h.cfg.TLS}
	return httpapi.NewServer(sc, h, h.Close, h.logger), nil
}
