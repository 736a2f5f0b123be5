package readstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/readstore/feed"
)

// ChangesPath is the change feed's route.
const ChangesPath = "/v1/changes"

// lastEventID is the header an EventSource sends when it reconnects.
const lastEventID = "Last-Event-ID"

// End reasons of a stream the server ends on purpose (event: end).
const (
	endShutdown = "shutdown"
	endMaxAge   = "max_age"
)

// changesRequest is a parsed GET /v1/changes.
type changesRequest struct {
	filter  feed.Filter
	withOps bool
	// start is where to resume; nil starts at the head (from=now) unless
	// beginning is set.
	start     *feed.Position
	beginning bool
}

// repeatable are the filter parameters, each of which may be given
// several times.
var repeatable = []string{"documentType", "documentId", "parent", "branch", "kind"}

func (h *Handler) parseChanges(r *http.Request) (changesRequest, *APIError) {
	var req changesRequest
	v := r.URL.Query()
	known := append(slices.Clone(repeatable), "operations", "from", "after")
	for name, vals := range v {
		switch {
		case !slices.Contains(known, name):
			slices.Sort(known)
			return req, paramError(name, "unknown query parameter (known: %s)", strings.Join(known, ", "))
		case slices.Contains(repeatable, name) && len(vals) > h.cfg.FeedMaxFilterValues:
			return req, paramError(name, "given %d times; at most %d values are accepted", len(vals), h.cfg.FeedMaxFilterValues)
		case !slices.Contains(repeatable, name) && len(vals) > 1:
			return req, paramError(name, "given %d times; give it once", len(vals))
		}
	}
	names := func(field string) ([]string, *APIError) {
		for _, s := range v[field] {
			if _, apiErr := checkName(field, s); apiErr != nil {
				return nil, apiErr
			}
		}
		return v[field], nil
	}
	var apiErr *APIError
	f := &req.filter
	for _, p := range []struct {
		name string
		to   *[]string
	}{{"documentType", &f.DocumentTypes}, {"documentId", &f.DocumentIDs}, {"parent", &f.Parents}, {"branch", &f.Branches}} {
		if *p.to, apiErr = names(p.name); apiErr != nil {
			return req, apiErr
		}
	}
	for _, k := range v["kind"] {
		if !slices.Contains(feed.Kinds, feed.Kind(k)) {
			return req, paramError("kind", "%q is not a kind (one of: %s)", k, kindList())
		}
		f.Kinds = append(f.Kinds, feed.Kind(k))
	}
	switch o := v.Get("operations"); {
	case !v.Has("operations") || o == "false":
	case o == "true":
		req.withOps = true
	default:
		return req, paramError("operations", "%q is not a boolean; give true or false", o)
	}
	switch from := v.Get("from"); {
	case !v.Has("from") || from == "now":
	case from == "beginning":
		req.beginning = true
	default:
		return req, paramError("from", "%q is not a start; give now or beginning", from)
	}
	if v.Has("after") {
		pos, err := feed.ParsePosition(v.Get("after"))
		if err != nil {
			return req, paramError("after", "%s", err)
		}
		req.start = &pos
	}
	switch ids := r.Header.Values(lastEventID); {
	case len(ids) > 1:
		return req, paramError(lastEventID, "given %d times; give it once", len(ids))
	case len(ids) == 1:
		// What a reconnecting EventSource sends wins over the URL it
		// reconnects to, which still carries the first from or after. An
		// EventSource sends no header rather than an empty one.
		pos, err := feed.ParsePosition(ids[0])
		if err != nil {
			return req, paramError(lastEventID, "%s", err)
		}
		req.start = &pos
	}
	return req, nil
}

func kindList() string {
	names := make([]string, len(feed.Kinds))
	for i, k := range feed.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// changes serves GET /v1/changes: the change feed as Server-Sent Events.
// Everything that can refuse the request (parameters, the stream limit,
// reading the start) answers before the first byte of the stream.
func (h *Handler) changes(w http.ResponseWriter, r *http.Request) *APIError {
	req, apiErr := h.parseChanges(r)
	if apiErr != nil {
		return apiErr
	}
	if h.isClosing() {
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the read store is shutting down; retry on another instance"}
	}
	if n := h.streams.Add(1); n > int64(h.cfg.FeedMaxStreams) {
		h.streams.Add(-1)
		h.m.feedRefused.Inc()
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: fmt.Sprintf("the read store already serves its maximum of %d change streams; retry later", h.cfg.FeedMaxStreams)}
	}
	defer h.streams.Add(-1)
	h.m.feedStreams.Inc()
	defer h.m.feedStreams.Dec()

	ctx := r.Context()
	var pos feed.Position
	switch {
	case req.start != nil:
		pos = *req.start
	case !req.beginning:
		end, err := h.log.TailEnd(ctx)
		if err != nil {
			return internal("read the end of the log", err)
		}
		pos = feed.Position{Tx: end.Horizon}
	}
	m := feed.NewMatcher(req.filter)
	if err := m.Init(ctx, h.log, pos.Tx); err != nil {
		return internal("resolve the parent filter", err)
	}

	s := &stream{
		h: h, w: w, rc: http.NewResponseController(w), withOps: req.withOps, m: m,
		reader: feed.NewReader(h.log, pos, h.cfg.FeedPageSize), pos: pos,
		logger: h.logger.With(httpapi.RequestIDField(r)),
	}
	// The server's read timeout would otherwise end the request's context
	// while the stream runs: nothing more is read from a stream's
	// connection but its closing. Writes get a deadline each.
	if err := s.rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return internal("open the change stream", err)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	reason := s.run(ctx, time.Now().Add(h.cfg.FeedMaxAge))
	h.m.feedEnds.WithLabelValues(reason).Inc()
	return nil
}

// stream is one subscriber's connection.
type stream struct {
	h       *Handler
	w       http.ResponseWriter
	rc      *http.ResponseController
	reader  *feed.Reader
	m       *feed.Matcher
	withOps bool
	logger  *zap.Logger

	pos       feed.Position // what the subscriber has been sent or scanned past
	lastWrite time.Time
	buf       []byte
}

// Reasons a stream ends without event: end, for the metric beside the
// wire's endShutdown and endMaxAge.
const (
	goneClient = "client_gone"
	goneSlow   = "write_failed"
	goneError  = "error"
)

// run streams until the subscriber goes, a write fails, the log fails, the
// handler closes or the stream reaches its age limit. It returns why.
func (s *stream) run(ctx context.Context, until time.Time) string {
	// The first frame is a heartbeat with the start position, so a client
	// that goes before any event resumes from where it started, not from
	// a later now.
	if err := s.heartbeat(); err != nil {
		return goneSlow
	}
	hb := s.h.cfg.FeedHeartbeat
	for {
		switch {
		case ctx.Err() != nil:
			return goneClient
		case s.h.isClosing():
			return s.end(endShutdown)
		case !time.Now().Before(until):
			return s.end(endMaxAge)
		}
		tx, err := s.reader.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return goneClient
			}
			// The stream cannot report it any more: the client reconnects
			// from its last id.
			s.logger.Warn("change stream ends: reading the log failed", zap.Error(err))
			return goneError
		}
		if tx != nil {
			if err := s.send(tx); err != nil {
				return goneSlow
			}
			if time.Since(s.lastWrite) >= hb {
				if err := s.heartbeat(); err != nil {
					return goneSlow
				}
			}
			continue
		}
		wait := min(time.Until(s.lastWrite.Add(hb)), time.Until(until))
		wctx, cancel := context.WithTimeout(ctx, max(wait, 0))
		end, ok, err := s.h.hub.Wait(wctx, s.reader.Position().Tx)
		cancel()
		switch {
		case err == nil:
			continue // rows to read
		case errors.Is(err, feed.ErrClosed):
			return s.end(endShutdown)
		case ctx.Err() != nil:
			return goneClient
		}
		if ok && end.Last < s.reader.Position().Tx {
			s.reader.Advance(end.Horizon)
			s.pos = s.reader.Position()
		}
		if time.Since(s.lastWrite) >= hb {
			if err := s.heartbeat(); err != nil {
				return goneSlow
			}
		}
	}
}

// send writes the transaction's matching events, then flushes. Every event
// is observed, the ones behind a resumed position too, so the parent
// filter follows the log's links.
func (s *stream) send(tx *feed.Transaction) error {
	wrote := false
	for i := range tx.Events {
		ev := &tx.Events[i]
		match := i >= tx.From && s.m.Match(ev)
		s.m.Observe(ev)
		if i < tx.From {
			continue
		}
		s.pos = ev.Position
		if !match {
			continue
		}
		b, err := ev.AppendJSON(s.frame("id: ", ev.Position.String(), "\nevent: ", string(ev.Kind), "\ndata: "), s.withOps)
		if err != nil {
			s.logger.Error("change stream: encoding an event failed", zap.Error(err))
			return err
		}
		if err := s.write(append(b, "\n\n"...)); err != nil {
			return err
		}
		s.h.m.feedEvents.Inc()
		wrote = true
	}
	s.pos = s.reader.Position()
	if wrote {
		return s.flush()
	}
	return nil
}

func (s *stream) heartbeat() error {
	c := s.pos.String()
	if err := s.write(s.frame("id: ", c, "\nevent: heartbeat\ndata: {\"cursor\":\"", c, "\"}\n\n")); err != nil {
		return err
	}
	return s.flush()
}

// end sends the last event of a stream the server ends, and returns its
// reason.
func (s *stream) end(reason string) string {
	c := s.pos.String()
	if s.write(s.frame("id: ", c, "\nevent: end\ndata: {\"cursor\":\"", c, "\",\"reason\":\"", reason, "\"}\n\n")) != nil || s.flush() != nil {
		return goneSlow
	}
	return reason
}

// frame starts the stream's reused buffer with parts: positions, kinds and
// reasons are ASCII without quotes or newlines, so they go in as they are.
func (s *stream) frame(parts ...string) []byte {
	s.buf = s.buf[:0]
	for _, p := range parts {
		s.buf = append(s.buf, p...)
	}
	return s.buf
}

// write writes b within the write timeout: a consumer that does not read
// is cut off rather than queued for.
func (s *stream) write(b []byte) error {
	if err := s.deadline(); err != nil {
		return err
	}
	_, err := s.w.Write(b)
	s.buf = b[:0]
	return err
}

func (s *stream) flush() error {
	if err := s.deadline(); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil {
		return err
	}
	s.lastWrite = time.Now()
	return nil
}

// deadline gives the next write the write timeout. A writer that cannot
// take deadlines (a test's recorder) writes without one.
func (s *stream) deadline() error {
	err := s.rc.SetWriteDeadline(time.Now().Add(s.h.cfg.FeedWriteTimeout))
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}
