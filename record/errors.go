package record

import (
	"errors"
	"fmt"
)

// ErrorType classifies why a job ended as a dead letter. The set is closed:
// dashboards and alerts key on these values, and a consumer of dead letters
// can rely on seeing no other.
type ErrorType string

const (
	// ErrDecode: the job record could not be read as a doclog.job record:
	// malformed JSON or text that is not Unicode, an unknown schema
	// version, a missing or unknown field, a name in text oplog.CheckText
	// refuses, or a record key that is not the job's documentId.
	ErrDecode ErrorType = "DECODE_ERROR"
	// ErrRecordTooLarge: the record's value exceeds the size doclog accepts
	// for its kind; the dead letter keeps a prefix of it.
	ErrRecordTooLarge ErrorType = "RECORD_TOO_LARGE"
	// ErrInvalidAction: an action lacks an id, type or scope or holds one in
	// text oplog.CheckText refuses, repeats another action's id, carries
	// input that is not JSON or that the model refuses, or names an action
	// type or scope the document model does not declare.
	ErrInvalidAction ErrorType = "INVALID_ACTION"
	// ErrUnknownDocumentType: no member knows the job's document type.
	// Executors wait a while first, since a rolling upgrade may be
	// bringing the model in.
	ErrUnknownDocumentType ErrorType = "UNKNOWN_DOCUMENT_TYPE"
	// ErrReducer: the model's reducer returned an error for an action; the
	// job is not applied.
	ErrReducer ErrorType = "REDUCER_ERROR"
	// ErrReducerPanic: the model's reducer panicked; the executor
	// recovered, and the job is not applied.
	ErrReducerPanic ErrorType = "REDUCER_PANIC"
	// ErrDocumentNotFound: a mutate or delete job names a document that
	// was never created.
	ErrDocumentNotFound ErrorType = "DOCUMENT_NOT_FOUND"
	// ErrDocumentExists: a create job names a document that exists.
	ErrDocumentExists ErrorType = "DOCUMENT_EXISTS"
	// ErrDocumentDeleted: the job targets a deleted document.
	ErrDocumentDeleted ErrorType = "DOCUMENT_DELETED"
	// ErrDependencyFailed: a job named in the queueHint failed, so this one
	// cannot run in the order its producer asked for.
	ErrDependencyFailed ErrorType = "DEPENDENCY_FAILED"
	// ErrTimeout: the job did not complete within the job timeout, for
	// example because a queueHint dependency never completed.
	ErrTimeout ErrorType = "TIMEOUT"
	// ErrConflictBudgetExhausted: the job lost the race for its streams to
	// concurrent writers more often than the conflict budget allows.
	// Conflicts never count against maxRetries; this is their own bound.
	ErrConflictBudgetExhausted ErrorType = "CONFLICT_BUDGET_EXHAUSTED"
	// ErrRetriesExhausted: a transient error persisted through maxRetries
	// attempts. Unavailability of Postgres or Kafka is never counted.
	ErrRetriesExhausted ErrorType = "RETRIES_EXHAUSTED"
	// ErrCancelled: an operator cancelled the job before it was applied
	// (doclogctl jobs cancel); nothing of it was written.
	ErrCancelled ErrorType = "CANCELLED"
	// ErrSignatureInvalid: an action's signature does not verify, names a
	// key or an algorithm the verifier does not know, or is missing where
	// the document type's policy requires one (package signing). Nothing
	// of the job is stored.
	ErrSignatureInvalid ErrorType = "SIGNATURE_INVALID"
	// ErrHashMismatch, ErrExcessiveShuffle, ErrMissingOperations and
	// ErrNonMonotonicTimestamps are sync's refusals (docs/sync.md); the
	// failed job's error carries the same name.
	ErrHashMismatch           ErrorType = "HASH_MISMATCH"
	ErrExcessiveShuffle       ErrorType = "EXCESSIVE_SHUFFLE"
	ErrMissingOperations      ErrorType = "MISSING_OPERATIONS"
	ErrNonMonotonicTimestamps ErrorType = "NON_MONOTONIC_TIMESTAMPS"
	// ErrBranchConflict: a promote found its target past the expected
	// tip; nothing was written. ErrBranchExists: a fork named a branch the
	// document has had. ErrBranchNotFound: a branch job named a branch
	// without operations, or a deleted one.
	ErrBranchConflict ErrorType = "BRANCH_CONFLICT"
	ErrBranchExists   ErrorType = "BRANCH_EXISTS"
	ErrBranchNotFound ErrorType = "BRANCH_NOT_FOUND"
	// ErrUnclassified: a terminal error that fits no other type; its
	// ErrorInfo name says more. A bug to classify, should it ever appear.
	ErrUnclassified ErrorType = "UNCLASSIFIED"
)

// ErrorTypes lists every ErrorType.
func ErrorTypes() []ErrorType {
	return []ErrorType{
		ErrDecode, ErrRecordTooLarge, ErrInvalidAction, ErrUnknownDocumentType,
		ErrReducer, ErrReducerPanic, ErrDocumentNotFound, ErrDocumentExists,
		ErrDocumentDeleted, ErrDependencyFailed, ErrTimeout,
		ErrConflictBudgetExhausted, ErrRetriesExhausted, ErrCancelled, ErrSignatureInvalid,
		ErrHashMismatch, ErrExcessiveShuffle, ErrMissingOperations, ErrNonMonotonicTimestamps,
		ErrBranchConflict, ErrBranchExists, ErrBranchNotFound, ErrUnclassified,
	}
}

// Valid reports whether t is one of ErrorTypes.
func (t ErrorType) Valid() bool {
	for _, v := range ErrorTypes() {
		if t == v {
			return true
		}
	}
	return false
}

// ValidationError reports a record that breaks its contract: a field that is
// missing, malformed or inconsistent with another. Encoders return it before
// writing anything; decoders wrap it in a *DecodeError.
type ValidationError struct {
	Schema string    // the record's schema, e.g. doclog.job.v1
	Field  string    // the offending field as a path, e.g. actions[2].scope
	Reason string    // what is wrong with it
	Type   ErrorType // how a dead letter of this record is classified
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("invalid %s record: %s", e.Schema, e.Reason)
	}
	return fmt.Sprintf("invalid %s record: %s: %s", e.Schema, e.Field, e.Reason)
}

// DecodeError reports a record that could not be decoded. Reason is precise
// enough to act on; Type classifies the dead letter it becomes.
type DecodeError struct {
	Schema string    // the schema the decoder expected, e.g. doclog.job.v1
	Reason string    // what is wrong, naming the field where there is one
	Type   ErrorType // ErrDecode, ErrRecordTooLarge or ErrInvalidAction
	Size   int       // the size of the record's value in bytes
	Err    error     // the underlying error, if any (*ValidationError, a JSON error)
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode %s record: %s", e.Schema, e.Reason)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Name is the stable name of every decode failure, whatever its Type.
func (e *DecodeError) Name() string { return ErrorName }

// ErrorName is the stable ErrorInfo name of a decode failure.
const ErrorName = "DecodeError"

// TypeOf returns the ErrorType of a decode or validation error, and
// ErrUnclassified for any other error.
func TypeOf(err error) ErrorType {
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Type
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Type
	}
	return ErrUnclassified
}
