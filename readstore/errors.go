package readstore

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error codes of the API's error body. They are part of the contract
// (openapi.yaml): clients branch on them, so they never change once released.
const (
	CodeUnauthorized       = "unauthorized"
	CodeInvalidParameter   = "invalid_parameter"
	CodeInvalidToken       = "invalid_consistency_token"
	CodeDocumentNotFound   = "document_not_found"
	CodeRevisionNotFound   = "revision_not_found"
	CodeConsistencyTimeout = "consistency_timeout"
	CodeStreamQuarantined  = "stream_quarantined"
	CodeReplayFailed       = "replay_failed"
	CodeUnavailable        = "unavailable"
	CodeInternal           = "internal"
)

// APIError is a request the API refuses. Message names the offending
// parameter first ("limit: must be at most 1000"); Field is that parameter
// alone, for programs.
type APIError struct {
	Status  int    // the HTTP status
	Code    string // one of the Code constants
	Field   string // the offending parameter, or "" when none
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// paramError builds a 400 whose message leads with the parameter.
func paramError(field, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidParameter, Field: field,
		Message: field + ": " + fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func writeError(w http.ResponseWriter, e *APIError) {
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="doclog"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, errorBody{Error: errorDetail{Code: e.Code, Message: e.Message, Field: e.Field}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built by this package from plain
		// types and stored JSON; failing to encode one is a bug.
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
