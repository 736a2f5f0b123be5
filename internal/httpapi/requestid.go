package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"go.uber.org/zap"
)

// HeaderRequestID carries a request's id on every response of an API (and,
// when a proxy in front set one, on the request).
const HeaderRequestID = "X-Request-Id"

// MaxRequestIDLength bounds a request id taken over from the client.
const MaxRequestIDLength = 64

type requestIDKey struct{}

// WithRequestID gives every request an id before next sees it: the
// X-Request-Id response header, the requestId of an error body (WriteError)
// and the request_id of the log entries about it, so a client quoting the id
// leads an operator to the entry that holds what the body leaves out.
//
// A request that arrives with a well-formed X-Request-Id (one value of 1 to
// MaxRequestIDLength letters, digits, '.', '_' or '-') keeps it, so the id a
// proxy in front assigned names the request end to end; anything else is
// replaced by 32 random hex digits. The charset keeps a client's id from
// forging log lines or headers; an id chosen by a client is only ever used to
// find log entries, never to decide anything.
//
// logger, if not nil, receives WriteError's causes and WriteJSON's encoding
// failures, with the request's id, method and path.
func WithRequestID(next http.Handler, logger *zap.Logger) http.Handler {
	if logger == nil {
		logger = zap.NewNop()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if len(r.Header.Values(HeaderRequestID)) != 1 || !wellFormedRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(HeaderRequestID, id)
		rw := &requestWriter{ResponseWriter: w, logger: logger.With(
			zap.String("request_id", id), zap.String("method", r.Method), zap.String("path", r.URL.Path))}
		inner := r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		next.ServeHTTP(rw, inner)
		// The mux sets the pattern it matched on the request it was given,
		// the copy; RequestMetrics, around this, labels by the original's.
		r.Pattern = inner.Pattern
	})
}

// RequestID is the id WithRequestID gave r, "" outside it.
func RequestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey{}).(string)
	return id
}

// RequestIDField is RequestID as a log field.
func RequestIDField(r *http.Request) zap.Field { return zap.String("request_id", RequestID(r)) }

func wellFormedRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (it aborts the process instead)
	return hex.EncodeToString(b[:])
}

// requestWriter is the ResponseWriter WithRequestID hands on: it carries the
// request's logger to WriteError and WriteJSON, which see only the writer.
type requestWriter struct {
	http.ResponseWriter
	logger *zap.Logger
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *requestWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes through, for handlers that stream.
func (w *requestWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// requestLogger is the logger WithRequestID attached to w, or a no-op one.
func requestLogger(w http.ResponseWriter) *zap.Logger {
	for {
		switch x := w.(type) {
		case *requestWriter:
			return x.logger
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return zap.NewNop()
		}
	}
}
