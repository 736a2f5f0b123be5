package readstore

import (
	"fmt"
	"net/http"

	"github.com/doclog/doclog/internal/httpapi"
)

// Error codes of the API's error body. They are part of the contract
// (openapi.yaml): clients branch on them, so they never change once released.
const (
	CodeUnauthorized       = httpapi.CodeUnauthorized
	CodeInvalidParameter   = "invalid_parameter"
	CodeInvalidToken       = "invalid_consistency_token"
	CodeDocumentNotFound   = "document_not_found"
	CodeRevisionNotFound   = "revision_not_found"
	CodeConsistencyTimeout = "consistency_timeout"
	CodeStreamQuarantined  = "stream_quarantined"
	CodeReplayFailed       = "replay_failed"
	CodeUnavailable        = "unavailable"
	CodeInternal           = httpapi.CodeInternal
)

// APIError is a request the API refuses; Message names the offending field
// first, Field is that path alone, for programs.
type APIError = httpapi.Error

// paramError builds a 400 whose message leads with the parameter.
func paramError(field, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidParameter, Field: field,
		Message: field + ": " + fmt.Sprintf(format, args...)}
}

// The error body and JSON writing are httpapi's, shared by every API.
var (
	writeError = httpapi.WriteError
	writeJSON  = httpapi.WriteJSON
)
