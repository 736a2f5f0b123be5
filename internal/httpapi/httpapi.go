// Package httpapi is the plumbing doclog's HTTP APIs (ingest, readstore)
// share: the error body and its writer, request ids, bearer-token
// authentication with read and write scopes, and a server with a start/stop
// lifecycle and graceful shutdown. The APIs own their routes, validation and
// error codes.
package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"go.uber.org/zap"
)

// Error codes every API shares.
const (
	// CodeUnauthorized is the error code of a missing or wrong bearer
	// token (401).
	CodeUnauthorized = "unauthorized"
	// CodeForbidden is the error code of a valid token without the scope a
	// route needs: a read token on a route that writes (403).
	CodeForbidden = "forbidden"
	// CodeInternal is the error code of a failure the client cannot act on
	// but to report its request id (500).
	CodeInternal = "internal"
)

// Error is a request an API refuses. Message names the offending field first
// ("actions[2].input.amount: must be an integer, not string"), so a client
// can show it as is; Field is that path alone, for programs.
//
// Message is for the client: it never holds a dependency's error, whose text
// names servers, ports and database users. That goes in Cause, which
// WriteError logs with the request id the client sees.
type Error struct {
	Status  int    // the HTTP status
	Code    string // the API's error code
	Field   string // the offending field as a path, or "" when none
	Message string
	// Cause is the failure behind the refusal, for the log only.
	Cause error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
	RequestID string `json:"requestId,omitempty"`
}

// RetryAfterSeconds is the Retry-After of every 503: an outage of a
// dependency is retried by the client, and a second keeps a retrying client
// from hammering an API whose dependency is back in a moment.
const RetryAfterSeconds = "1"

// WriteError writes e as {"error": {code, message, field, requestId}}, with
// the headers its status calls for. The request id is the response's
// X-Request-Id (WithRequestID sets it before the handler runs), so the body
// and the header always agree. A Cause is logged with that id: at warn level
// for a 503 (the dependency is expected back), debug level for a client's
// error and error level for the server's.
func WriteError(w http.ResponseWriter, e *Error) {
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="doclog"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", RetryAfterSeconds)
	}
	if e.Cause != nil {
		logger := requestLogger(w)
		log := logger.Error
		switch {
		case e.Status == http.StatusServiceUnavailable:
			log = logger.Warn
		case e.Status < 500:
			log = logger.Debug
		}
		log("request failed", zap.Int("status", e.Status), zap.String("code", e.Code), zap.String("message", e.Message), zap.Error(e.Cause))
	}
	WriteJSON(w, e.Status, errorBody{Error: errorDetail{Code: e.Code, Message: e.Message, Field: e.Field, RequestID: w.Header().Get(HeaderRequestID)}})
}

// WriteReady and WriteNotReady answer an API's /readyz, which anyone may
// call: 200 {"status":"ready"}, or 503 {"status":"not ready"} with
// Retry-After and no reason, since a reason would name the dependency and
// what its driver said. The ops port's /readyz has the reasons.
func WriteReady(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// WriteNotReady is WriteReady's 503.
func WriteNotReady(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Retry-After", RetryAfterSeconds)
	WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready"})
}

// WriteJSON writes v as the JSON response body with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built by doclog from plain types and
		// stored JSON, which the database checked; one that does not encode
		// is a bug. The encoder's message quotes the value, so it goes to
		// the log and the client gets the error shape with the request id.
		requestLogger(w).Error("encode the response", zap.Int("status", status), zap.Error(err))
		id := w.Header().Get(HeaderRequestID)
		b, _ = json.Marshal(errorBody{Error: errorDetail{Code: CodeInternal, RequestID: id,
			Message: "the response could not be encoded; the server's log has the details under the request id"}})
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// MinTokenLength is the shortest bearer token doclog serve accepts: 32
// characters, what `openssl rand -hex 16` prints, 128 bits when they are
// random hex. A bearer token is a password no human types, so nothing is lost
// by refusing short ones, and a short one falls to guessing.
const MinTokenLength = 32

// Scope is what a token may do.
type Scope int

const (
	// ScopeRead is the scope of a read token: the routes that only read.
	ScopeRead Scope = iota + 1
	// ScopeWrite is the scope of a write token: every route.
	ScopeWrite
)

// Bearer checks "Authorization: Bearer <token>" against read and write
// tokens; any token of a list is accepted, so tokens rotate without
// downtime. A write token may call every route, a read token only the ones
// that read.
type Bearer struct {
	tokens []bearerToken
	writes bool // some token may write
}

type bearerToken struct {
	digest [sha256.Size]byte
	write  int // 1 for a write token: a mask for the constant-time check
}

// NewBearer holds the tokens' digests; empty tokens are ignored. No token at
// all turns authentication off. A token in both lists is a write token.
func NewBearer(read, write []string) Bearer {
	var b Bearer
	add := func(tokens []string, w int) {
		for _, t := range tokens {
			if t = strings.TrimSpace(t); t != "" {
				b.tokens = append(b.tokens, bearerToken{digest: sha256.Sum256([]byte(t)), write: w})
				b.writes = b.writes || w == 1
			}
		}
	}
	add(read, 0)
	add(write, 1)
	return b
}

// Off reports that no token is configured: every request is allowed.
func (b Bearer) Off() bool { return len(b.tokens) == 0 }

// Writable reports whether a request can pass Check(r, ScopeWrite): with
// authentication off, or with a write token configured.
func (b Bearer) Writable() bool { return b.Off() || b.writes }

// Check returns nil when the request may call a route that needs scope, a 401
// when it carries no valid token and a 403 when its token is valid but may
// only read. Every configured token is compared, in constant time over
// digests of equal length, so neither the position of a match, a token's
// length nor its scope shows in the timing.
func (b Bearer) Check(r *http.Request, need Scope) *Error {
	if b.Off() {
		return nil
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Field: "Authorization",
			Message: "Authorization: a bearer token is required (Authorization: Bearer <token>)"}
	}
	given := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match, write := 0, 0
	for i := range b.tokens {
		m := subtle.ConstantTimeCompare(given[:], b.tokens[i].digest[:])
		match |= m
		write |= m & b.tokens[i].write
	}
	if match != 1 {
		return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Field: "Authorization",
			Message: "Authorization: the bearer token is not valid"}
	}
	if need == ScopeWrite && write != 1 {
		return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Field: "Authorization",
			Message: "Authorization: the bearer token may only read; this route writes and needs a write token"}
	}
	return nil
}

// CheckTokens reports the first token of a list named flag that doclog
// serve refuses: an empty one, or one shorter than MinTokenLength. The error
// names the flag and the token's 0-based index, never the token.
func CheckTokens(flag string, tokens []string) error {
	for i, t := range tokens {
		n := utf8.RuneCountInString(strings.TrimSpace(t))
		switch {
		case n == 0:
			return fmt.Errorf("%s: the token at index %d (0-based) is empty", flag, i)
		case n < MinTokenLength:
			return fmt.Errorf("%s: the token at index %d (0-based) is %d characters long; a token needs at least %d (e.g. openssl rand -hex 32)",
				flag, i, n, MinTokenLength)
		}
	}
	return nil
}
