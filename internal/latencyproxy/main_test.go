package main

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echo serves an upstream that writes back whatever it reads.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	return ln.Addr().String()
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// A round trip through a link of 5 ms each way takes at least 10 ms, and the
// bytes arrive intact in both directions. (A lower bound only: how much
// longer it takes depends on the machine.)
func TestLinkDelaysEachWay(t *testing.T) {
	listen := freeAddr(t)
	stop, err := start(links{listen + "=" + echo(t)}, 5*time.Millisecond)
	require.NoError(t, err)
	defer stop()

	c, err := net.Dial("tcp", listen)
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	for _, msg := range []string{"first\n", "second\n"} {
		began := time.Now()
		_, err := c.Write([]byte(msg))
		require.NoError(t, err)
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, msg, got)
		require.GreaterOrEqual(t, time.Since(began), 10*time.Millisecond)
	}
}

func TestStartRefusesBadLinks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		links   links
		latency time.Duration
	}{
		{"none", nil, time.Millisecond},
		{"no upstream", links{"127.0.0.1:0"}, time.Millisecond},
		{"fraction of a millisecond", links{"127.0.0.1:0=127.0.0.1:1"}, 1500 * time.Microsecond},
		{"negative", links{"127.0.0.1:0=127.0.0.1:1"}, -time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := start(tc.links, tc.latency)
			require.Error(t, err)
		})
	}
}
