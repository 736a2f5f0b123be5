package ingest

import (
	"fmt"

	"github.com/doclog/doclog/internal/httpapi"
)

// Error codes of the API's error body. They are part of the contract
// (openapi.yaml): clients branch on them, so they never change once released.
const (
	CodeUnauthorized        = httpapi.CodeUnauthorized
	CodeForbidden           = httpapi.CodeForbidden
	CodeUnsupportedMedia    = "unsupported_media_type"
	CodeBodyTooLarge        = "body_too_large"
	CodeTooManyActions      = "too_many_actions"
	CodeTooManyJobs         = "too_many_jobs"
	CodeInputTooLarge       = "input_too_large"
	CodeRecordTooLarge      = "record_too_large"
	CodeMalformedJSON       = "malformed_json"
	CodeInvalidField        = "invalid_field"
	CodeUnknownDocumentType = "unknown_document_type"
	CodeUnknownAction       = "unknown_action"
	CodeInvalidScope        = "invalid_scope"
	CodeInvalidInput        = "invalid_input"
	CodeSignatureInvalid    = "signature_invalid"
	CodeJobNotFound         = "job_not_found"
	CodeBrokerUnavailable   = "broker_unavailable"
	CodeResultsUnavailable  = "results_unavailable"
	CodeExecutorLag         = "executor_lag"
	CodeInternal            = httpapi.CodeInternal
)

// APIError is a request the API refuses; Message names the offending field
// first, Field is that path alone, for programs.
type APIError = httpapi.Error

// fieldError builds an APIError whose message leads with the field.
func fieldError(status int, code, field, format string, args ...any) *APIError {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &APIError{Status: status, Code: code, Field: field, Message: msg}
}

// The error body and JSON writing are httpapi's, shared by every API.
var (
	writeError = httpapi.WriteError
	writeJSON  = httpapi.WriteJSON
)
