package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/httpapi"
)

// boundedServer serves a handler that reads the body (as every POST route
// does, auth included) under short bounds.
func boundedServer(t *testing.T, cfg httpapi.ServerConfig) string {
	t.Helper()
	cfg.Name, cfg.Addr = "test", "127.0.0.1:0"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	srv := httpapi.NewServer(cfg, h, nil, nil)
	require.NoError(t, srv.Start(context.Background()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	return srv.Addr().String()
}

// closedWithin reads from conn until the server closes it, or fails the
// test when within passes first.
func closedWithin(t *testing.T, conn net.Conn, within time.Duration) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(within)))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", within)
	}
}

// A request whose body trickles in is cut when the read timeout passes,
// long before the body would be complete.
func TestTrickledBodyIsCut(t *testing.T) {
	t.Parallel()
	addr := boundedServer(t, httpapi.ServerConfig{ReadTimeout: 500 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	require.NoError(t, err)
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		// One byte every 100ms: 1000 bytes would take 100s.
		for range 1000 {
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	closedWithin(t, conn, 10*time.Second)
	select {
	case <-cut:
	case <-time.After(10 * time.Second):
		t.Fatal("the trickle went on after the server closed the connection")
	}
}

// A keep-alive connection that carries no further request is closed after
// the idle timeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	t.Parallel()
	addr := boundedServer(t, httpapi.ServerConfig{IdleTimeout: 500 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "ok", string(body))
	require.False(t, resp.Close, "the connection was kept alive for the next request")
	closedWithin(t, conn, 10*time.Second)
}

// Headers beyond MaxHeaderBytes are refused with 431.
func TestOversizedHeadersAreRefused(t *testing.T) {
	t.Parallel()
	addr := boundedServer(t, httpapi.ServerConfig{})
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("a", httpapi.DefaultMaxHeaderBytes+8192))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}

// The defaults bound every connection.
func TestServerConfigDefaults(t *testing.T) {
	c := httpapi.ServerConfig{}.WithDefaults()
	require.Equal(t, httpapi.DefaultReadTimeout, c.ReadTimeout)
	require.Equal(t, httpapi.DefaultWriteTimeout, c.WriteTimeout)
	require.Equal(t, httpapi.DefaultIdleTimeout, c.IdleTimeout)
	require.Equal(t, httpapi.DefaultMaxHeaderBytes, c.MaxHeaderBytes)
	srv := httpapi.NewHTTPServer(httpapi.ServerConfig{WriteTimeout: time.Minute}, http.NotFoundHandler(), nil)
	require.Equal(t, time.Minute, srv.WriteTimeout)
	require.Equal(t, httpapi.DefaultReadTimeout, srv.ReadTimeout)
}
