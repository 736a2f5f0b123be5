package client

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

type parsed struct {
	event, data, lastID string
}

func readAll(t testing.TB, r io.Reader) ([]parsed, string) {
	t.Helper()
	sr := newSSEReader(r)
	var out []parsed
	for {
		ev, err := sr.next()
		if errors.Is(err, io.EOF) {
			return out, sr.lastID
		}
		require.NoError(t, err)
		out = append(out, parsed{ev.event, ev.data, sr.lastID})
	}
}

func TestSSEParsing(t *testing.T) {
	t.Parallel()
	stream := ": a comment\n" +
		"id: 1-0\nevent: created\ndata: {\"a\":1}\n\n" +
		"data: first\ndata:second\ndata\n\n" + // the id stays, the type is "message"
		"id: 2-0\r\nevent: heartbeat\r\ndata: {}\r\n\r\n" +
		"id: 3-0\revent: end\rdata: {\"reason\":\"shutdown\"}\r\r" +
		"id: 4-0\n\n" + // an id and no data: not dispatched, but the last id
		"id: bad\x00id\nevent: x\ndata: y\n\n" + // an id holding NUL is ignored
		"event: cut\ndata: never dispatched"
	want := []parsed{
		{"created", `{"a":1}`, "1-0"},
		{"message", "first\nsecond\n", "1-0"},
		{"heartbeat", "{}", "2-0"},
		{"end", `{"reason":"shutdown"}`, "3-0"},
		{"x", "y", "4-0"},
	}
	for name, r := range map[string]io.Reader{
		"whole":       strings.NewReader(stream),
		"one byte":    iotest.OneByteReader(strings.NewReader(stream)),
		"half chunks": iotest.HalfReader(strings.NewReader(stream)),
	} {
		got, last := readAll(t, r)
		require.Equal(t, want, got, name)
		require.Equal(t, "4-0", last, name)
	}
}

func TestSSELineTooLong(t *testing.T) {
	t.Parallel()
	r := newSSEReader(strings.NewReader("data: " + strings.Repeat("x", maxEventLine) + "\n\n"))
	_, err := r.next()
	require.Error(t, err)
	require.NotErrorIs(t, err, io.EOF)
}

// The parser never panics, and reads the same events however the stream is
// cut into reads.
func FuzzSSE(f *testing.F) {
	f.Add("id: 1\nevent: created\ndata: {}\n\n")
	f.Add("data: a\r\ndata: b\r\r\n: c\rid\n\n")
	f.Add("\r\n\r\r\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		whole, lastWhole := readAll(t, strings.NewReader(s))
		bytewise, lastBytewise := readAll(t, iotest.OneByteReader(strings.NewReader(s)))
		require.Equal(t, whole, bytewise)
		require.Equal(t, lastWhole, lastBytewise)
	})
}
