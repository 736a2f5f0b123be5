package client

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// maxEventLine bounds one line of the event stream: a change with its
// operations holds at most one job record (1 MiB by default) and its
// hashes, so a longer line is not the feed's.
const maxEventLine = 16 << 20

// sseEvent is one event of a Server-Sent Events stream.
type sseEvent struct {
	// event is the event's type, "message" when the stream named none.
	event string
	data  string
}

// sseReader reads a Server-Sent Events stream as the HTML standard defines
// it: lines ending in CRLF, LF or CR; "field: value" lines; comments
// starting with ':'; a blank line dispatching the event. lastID is the
// stream's last event id, updated at every dispatch as the standard says,
// also for a block with an id and no data. A "retry:" field is ignored:
// the client's own backoff paces reconnects.
type sseReader struct {
	s      *bufio.Scanner
	lastID string

	id, event string
	data      strings.Builder
	hasData   bool
}

func newSSEReader(r io.Reader) *sseReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	s.Split(scanSSELines)
	return &sseReader{s: s}
}

// next returns the next event with data, or the read's error (io.EOF at
// the end of the stream). An event cut off by the end is dropped, as the
// standard says.
func (r *sseReader) next() (sseEvent, error) {
	for r.s.Scan() {
		line := r.s.Bytes()
		if len(line) == 0 {
			r.lastID = r.id
			ev := sseEvent{event: r.event, data: r.data.String()}
			has := r.hasData
			r.event, r.hasData = "", false
			r.data.Reset()
			if !has {
				continue
			}
			if ev.event == "" {
				ev.event = "message"
			}
			return ev, nil
		}
		r.field(line)
	}
	if err := r.s.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

func (r *sseReader) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "event":
		r.event = string(value)
	case "data":
		if r.hasData {
			r.data.WriteByte('\n')
		}
		r.data.Write(value)
		r.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.id = string(value)
		}
	}
}

// scanSSELines splits at CRLF, LF or a lone CR. A CR at the end of the
// data read so far waits for the next byte, which may be its LF.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, c := range data {
		switch c {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil
		}
	}
	if atEOF && len(data) > 0 {
		// A last line without its end: the event it belongs to is never
		// dispatched, but its fields are read like any other.
		return len(data), data, nil
	}
	return 0, nil, nil
}
