package chaos

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoServer answers every line with itself.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	return r.ReadString('\n')
}

func TestProxyCutHoldsTrafficUntilHealed(t *testing.T) {
	p, err := ListenProxy()
	require.NoError(t, err)
	defer p.Close()
	p.Serve(echoServer(t))

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	got, err := roundTrip(c, r, "before", 2*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "before\n", got)

	p.Cut()
	_, err = roundTrip(c, r, "during", 300*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "nothing comes back while cut")
	assert.True(t, ne.Timeout(), "a cut is silence, not a reset: %v", err)

	// A connection made during the cut is accepted and hangs too.
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	_, err = roundTrip(c2, r2, "new", 300*time.Millisecond)
	require.Error(t, err)

	p.Heal()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	got, err = r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "during\n", got, "the held bytes go through once healed")
	_ = c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	got, err = r2.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "new\n", got)
}

func TestProxyCloseDropsConnections(t *testing.T) {
	p, err := ListenProxy()
	require.NoError(t, err)
	p.Serve(echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	_, err = roundTrip(c, r, "x", 2*time.Second)
	require.NoError(t, err)
	p.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = r.ReadString('\n')
	require.Error(t, err, "the client sees its connection end")
	_, err = net.DialTimeout("tcp", p.Addr(), time.Second)
	require.Error(t, err, "a closed proxy listens no more")
}
