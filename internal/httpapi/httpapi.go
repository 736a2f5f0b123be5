// Package httpapi is the plumbing doclog's HTTP APIs (ingest, readstore)
// share: the error body and its writer, bearer-token authentication, and a
// server with a start/stop lifecycle and graceful shutdown. The APIs own
// their routes, validation and error codes.
package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// CodeUnauthorized is the error code of a missing or wrong bearer token.
const CodeUnauthorized = "unauthorized"

// Error is a request an API refuses. Message names the offending field first
// ("actions[2].input.amount: must be an integer, not string"), so a client
// can show it as is; Field is that path alone, for programs.
type Error struct {
	Status  int    // the HTTP status
	Code    string // the API's error code
	Field   string // the offending field as a path, or "" when none
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// WriteError writes e as {"error": {code, message, field}}, with the headers
// its status calls for.
func WriteError(w http.ResponseWriter, e *Error) {
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="doclog"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	WriteJSON(w, e.Status, errorBody{Error: errorDetail{Code: e.Code, Message: e.Message, Field: e.Field}})
}

// WriteJSON writes v as the JSON response body with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built by doclog from plain types and
		// stored JSON; failing to encode one is a bug, reported as such.
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Bearer checks "Authorization: Bearer <token>" against a set of tokens;
// any of them is accepted, so tokens rotate without downtime.
type Bearer struct {
	digests [][sha256.Size]byte
}

// NewBearer holds the tokens' digests; empty tokens are ignored. No token at
// all turns authentication off.
func NewBearer(tokens []string) Bearer {
	var b Bearer
	for _, t := range tokens {
		if t = strings.TrimSpace(t); t != "" {
			b.digests = append(b.digests, sha256.Sum256([]byte(t)))
		}
	}
	return b
}

// Off reports that no token is configured: every request is allowed.
func (b Bearer) Off() bool { return len(b.digests) == 0 }

// Check returns nil when the request may proceed and a 401 otherwise. Every
// configured token is compared, in constant time over digests of equal
// length, so neither the position of a match nor a token's length shows in
// the timing.
func (b Bearer) Check(r *http.Request) *Error {
	if b.Off() {
		return nil
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Field: "Authorization",
			Message: "Authorization: a bearer token is required (Authorization: Bearer <token>)"}
	}
	given := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for i := range b.digests {
		match |= subtle.ConstantTimeCompare(given[:], b.digests[i][:])
	}
	if match != 1 {
		return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Field: "Authorization",
			Message: "Authorization: the bearer token is not valid"}
	}
	return nil
}
