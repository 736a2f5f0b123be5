package ingest

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error codes of the API's error body. They are part of the contract
// (openapi.yaml): clients branch on them, so they never change once released.
const (
	CodeUnauthorized        = "unauthorized"
	CodeUnsupportedMedia    = "unsupported_media_type"
	CodeBodyTooLarge        = "body_too_large"
	CodeTooManyActions      = "too_many_actions"
	CodeInputTooLarge       = "input_too_large"
	CodeRecordTooLarge      = "record_too_large"
	CodeMalformedJSON       = "malformed_json"
	CodeInvalidField        = "invalid_field"
	CodeUnknownDocumentType = "unknown_document_type"
	CodeUnknownAction       = "unknown_action"
	CodeInvalidScope        = "invalid_scope"
	CodeInvalidInput        = "invalid_input"
	CodeJobNotFound         = "job_not_found"
	CodeBrokerUnavailable   = "broker_unavailable"
	CodeResultsUnavailable  = "results_unavailable"
	CodeInternal            = "internal"
)

// APIError is a request the API refuses. Message names the offending field
// first ("actions[2].input.amount: must be an integer, not string"), so a
// client can show it as is; Field is that path alone, for programs.
type APIError struct {
	Status  int    // the HTTP status
	Code    string // one of the Code constants
	Field   string // the offending field as a path, or "" when none
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// fieldError builds an APIError whose message leads with the field.
func fieldError(status int, code, field, format string, args ...any) *APIError {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &APIError{Status: status, Code: code, Field: field, Message: msg}
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
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="doclog"`)
	}
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, errorBody{Error: errorDetail{Code: e.Code, Message: e.Message, Field: e.Field}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built by this package from plain
		// types; failing to encode one is a bug, reported as such.
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
