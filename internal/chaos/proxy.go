package chaos

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Proxy forwards loopback TCP connections to one upstream and can cut them:
// while cut, nothing it holds moves in either direction and new connections
// are accepted but not forwarded, as in a network partition (the peers see
// silence and time out, not a reset). Healing lets the held bytes through.
//
// Ours rather than toxiproxy's: the run needs this one toxic, not a module
// with its own HTTP API and dependencies.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	open  chan struct{} // closed while traffic flows
	conns map[net.Conn]struct{}
	done  bool
}

// ListenProxy listens on a loopback port of its own; the upstream may be set
// later (the broker's proxied listener is known only once the broker runs).
func ListenProxy() (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for a proxy: %w", err)
	}
	open := make(chan struct{})
	close(open)
	return &Proxy{ln: ln, open: open, conns: map[net.Conn]struct{}{}}, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Serve forwards to upstream until Close.
func (p *Proxy) Serve(upstream string) {
	p.upstream = upstream
	go func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

// Cut stops all traffic until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// Heal lets traffic flow again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// Close stops listening and drops every connection.
func (p *Proxy) Close() {
	p.Heal()
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

func (p *Proxy) forward(client net.Conn) {
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	<-p.gate()
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, holding each chunk while the proxy is cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
