package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Error codes the APIs answer in APIError.Code (ingest/openapi.yaml and
// readstore/openapi.yaml list them). A proxy's answer has no code.
const (
	CodeUnauthorized            = "unauthorized"
	CodeForbidden               = "forbidden"
	CodeNotFound                = "not_found"
	CodeMethodNotAllowed        = "method_not_allowed"
	CodeInternal                = "internal"
	CodeUnsupportedMediaType    = "unsupported_media_type"
	CodeBodyTooLarge            = "body_too_large"
	CodeTooManyActions          = "too_many_actions"
	CodeInputTooLarge           = "input_too_large"
	CodeRecordTooLarge          = "record_too_large"
	CodeMalformedJSON           = "malformed_json"
	CodeInvalidField            = "invalid_field"
	CodeUnknownDocumentType     = "unknown_document_type"
	CodeUnknownAction           = "unknown_action"
	CodeInvalidScope            = "invalid_scope"
	CodeInvalidInput            = "invalid_input"
	CodeJobNotFound             = "job_not_found"
	CodeBrokerUnavailable       = "broker_unavailable"
	CodeResultsUnavailable      = "results_unavailable"
	CodeExecutorLag             = "executor_lag" // ingest's backpressure (429), retried after its Retry-After
	CodeInvalidParameter        = "invalid_parameter"
	CodeInvalidConsistencyToken = "invalid_consistency_token"
	CodeDocumentNotFound        = "document_not_found"
	CodeRevisionNotFound        = "revision_not_found"
	CodeConsistencyTimeout      = "consistency_timeout"
	CodeStreamQuarantined       = "stream_quarantined"
	CodeReplayFailed            = "replay_failed"
	CodeUnavailable             = "unavailable"
)

// APIError is an answer of an API other than success: the HTTP status and
// what the JSON error body {"error":{"code","message","field","requestId"}}
// says. A body that is not that shape (a proxy's page) leaves Code empty
// and puts the start of the body in Message.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the error's stable code, one of the Code constants.
	Code string
	// Field names the offending field, parameter or header, if one is.
	Field string
	// Message is for people; it leads with the field when there is one.
	Message string
	// RequestID is the request's id (the body's requestId, or the
	// X-Request-Id header): quote it to find the server's log entries.
	RequestID string
	// RetryAfter is the answer's Retry-After (seconds or a date, at most a
	// day), zero without one.
	RetryAfter time.Duration
	// Method and URL are the request's.
	Method, URL string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d", e.Method, e.URL, e.StatusCode)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" (request id " + e.RequestID + ")")
	}
	return b.String()
}

// maxErrorBody bounds how much of an error answer is read: the APIs' bodies
// are small, and a proxy's page is cut to its start.
const maxErrorBody = 64 << 10

// parseAPIError reads the answer of a failed request into an *APIError.
func parseAPIError(resp *http.Response) *APIError {
	e := &APIError{
		StatusCode: resp.StatusCode,
		RequestID:  resp.Header.Get("X-Request-Id"),
		RetryAfter: RetryAfter(resp.Header, time.Now()),
	}
	if resp.Request != nil {
		e.Method = resp.Request.Method
		e.URL = redactedURL(resp.Request.URL.String())
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body struct {
		Error *struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Field     string `json:"field"`
			RequestID string `json:"requestId"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e.Code, e.Message, e.Field = body.Error.Code, body.Error.Message, body.Error.Field
		if body.Error.RequestID != "" {
			e.RequestID = body.Error.RequestID
		}
		return e
	}
	e.Message = strings.TrimSpace(string(raw))
	if len(e.Message) > 200 {
		e.Message = e.Message[:200] + "…"
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// redactedURL drops the query of a URL for an error message: a consistency
// token may travel there, and it names documents.
func redactedURL(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i]
	}
	return s
}

// AsAPIError returns the *APIError in err's chain, or nil.
func AsAPIError(err error) *APIError {
	var e *APIError
	if errors.As(err, &e) {
		return e
	}
	return nil
}

func hasStatus(err error, status int) bool {
	e := AsAPIError(err)
	return e != nil && e.StatusCode == status
}

func hasCode(err error, code string) bool {
	e := AsAPIError(err)
	return e != nil && e.Code == code
}

// IsNotFound reports whether err is a 404: a job id that cannot have a
// result, a document, revision or route the server does not have.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsUnauthorized reports whether err is a 401: no token, or one the server
// does not know.
func IsUnauthorized(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

// IsForbidden reports whether err is a 403: a read token on a submit.
func IsForbidden(err error) bool { return hasStatus(err, http.StatusForbidden) }

// IsInvalid reports whether err is the server refusing the request as
// malformed or not allowed by its rules (400, 413, 415 or 422): sending it
// again as it is cannot succeed.
func IsInvalid(err error) bool {
	e := AsAPIError(err)
	if e == nil {
		return false
	}
	switch e.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// IsUnavailable reports whether err is a 503: a dependency of the server is
// down or it is stopping. The client already retried it MaxAttempts times.
func IsUnavailable(err error) bool { return hasStatus(err, http.StatusServiceUnavailable) }

// IsConsistencyTimeout reports whether err is the read store's 504
// consistency_timeout: the projection did not reach the token within the
// read's wait. It is not retried by the client, since the wait was the
// caller's choice; read again, with a longer WithWait, to wait more.
func IsConsistencyTimeout(err error) bool { return hasCode(err, CodeConsistencyTimeout) }

// IsQuarantined reports whether err is the read store's 409
// stream_quarantined: the projection stopped below the token on a stream an
// operator must lift; waiting longer does not help.
func IsQuarantined(err error) bool { return hasCode(err, CodeStreamQuarantined) }

// JobFailedError is a job whose status is FAILED: the executor will never
// commit it. ErrorHistory is what the job's status reports, the failure
// that ended the job last.
type JobFailedError struct {
	JobID        string
	ErrorHistory []ErrorInfo
}

func (e *JobFailedError) Error() string {
	if len(e.ErrorHistory) == 0 {
		return "job " + e.JobID + " failed"
	}
	return "job " + e.JobID + " failed: " + e.ErrorHistory[len(e.ErrorHistory)-1].String()
}

// ErrorInfo is one failure of a job: the error's stable name (as
// "RevisionMismatch"), its message and its cause, if any.
type ErrorInfo struct {
	Name    string     `json:"name"`
	Message string     `json:"message"`
	Cause   *ErrorInfo `json:"cause,omitempty"`
}

// String is "Name: message", then ": " and the cause's, down the chain.
func (i ErrorInfo) String() string {
	s := i.Name + ": " + i.Message
	if i.Cause != nil {
		s += ": " + i.Cause.String()
	}
	return s
}
