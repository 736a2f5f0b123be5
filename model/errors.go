package model

import (
	"errors"
	"fmt"

	oplog "github.com/doclog/doclog/log"
)

// Error names, stable across process and topic boundaries: the executor
// stores them in ErrorInfo.Name and classification keys on them, so they never
// change once released.
const (
	NameInvalidInput             = "InvalidInput"
	NameUnknownActionType        = "UnknownActionType"
	NameModelNotFound            = "ModelNotFound"
	NameDocumentNotFound         = "DocumentNotFound"
	NameDocumentExists           = "DocumentExists"
	NameDocumentDeleted          = "DocumentDeleted"
	NameReducerError             = "ReducerError"
	NameBusinessRuleViolation    = "BusinessRuleViolation"
	NameHashMismatch             = "HashMismatch"
	NameMissingUpgradeTransition = "MissingUpgradeTransition"
	NameDowngradeNotSupported    = "DowngradeNotSupported"
	NameStreamGap                = "StreamGap"
	NameSkipBeforeStart          = "SkipBeforeStart"
)

// Named is the log's: every error of this package implements it, as the
// log's and the executor's own errors do.
type Named = oplog.Named

// ErrorName is oplog.ErrorName, the one lookup: the name of the first Named
// error in err's chain, or "" when there is none.
func ErrorName(err error) string { return oplog.ErrorName(err) }

// declared reports whether err's first named error is one of this package's:
// the errors Apply is documented to return. A reducer's error named by
// another package (a log conflict, say) is undeclared, and so is reported as
// a ReducerError like any other undeclared error rather than taken for a
// verdict of the model's.
func declared(err error) bool {
	switch ErrorName(err) {
	case NameInvalidInput, NameUnknownActionType, NameModelNotFound, NameDocumentNotFound,
		NameDocumentExists, NameDocumentDeleted, NameReducerError, NameBusinessRuleViolation,
		NameHashMismatch, NameMissingUpgradeTransition, NameDowngradeNotSupported, NameStreamGap,
		NameSkipBeforeStart:
		return true
	}
	return false
}

// At locates an error: the stream, the index the action would have taken (or
// the operation's index during replay) and the action type. Reducers leave it
// empty; Apply and Replay fill it in.
type At struct {
	Stream     oplog.StreamKey
	Index      int64
	ActionType string
}

func (a *At) at() *At { return a }

func (a At) String() string {
	if a.Stream == (oplog.StreamKey{}) {
		if a.ActionType == "" {
			return ""
		}
		return a.ActionType + ": "
	}
	return fmt.Sprintf("%s at %s index %d: ", a.ActionType, a.Stream, a.Index)
}

// locatable is an error whose location Apply fills in.
type locatable interface {
	error
	at() *At
}

// locate stamps where into err if it is one of ours and has no location yet.
func locate(err error, where At) error {
	var l locatable
	if errors.As(err, &l) {
		if a := l.at(); a.Stream == (oplog.StreamKey{}) {
			*a = where
		}
	}
	return err
}

// InvalidInput reports an action whose input (or scope) the model refuses
// before any state is touched. Reason is for humans and reaches the client.
type InvalidInput struct {
	At
	Reason string
	// Field is the input field at fault, as a path ("name", "lines[2].id"),
	// when the check knows it; Err is the cause, when there is one.
	Field string
	Err   error
}

func (e *InvalidInput) Name() string { return NameInvalidInput }
func (e *InvalidInput) Error() string {
	return e.At.String() + "invalid input: " + e.Reason
}
func (e *InvalidInput) Unwrap() error { return e.Err }

// Invalidf builds an InvalidInput for a reducer or an input decoder.
func Invalidf(format string, args ...any) *InvalidInput {
	return &InvalidInput{Reason: fmt.Sprintf(format, args...)}
}

// UnknownActionType reports an action type the model at that version does
// not declare.
type UnknownActionType struct {
	At
	DocumentType string
	Version      int
}

func (e *UnknownActionType) Name() string { return NameUnknownActionType }
func (e *UnknownActionType) Error() string {
	return fmt.Sprintf("%sunknown action type %q for %s v%d", e.At.String(), e.ActionType, e.DocumentType, e.Version)
}

// ModelNotFound reports a document type, or a version of it, that is not
// registered. During a rolling upgrade the executor waits on it rather than
// failing the job.
type ModelNotFound struct {
	DocumentType string
	Version      int // 0 when no version of the type is registered
}

func (e *ModelNotFound) Name() string { return NameModelNotFound }
func (e *ModelNotFound) Error() string {
	if e.Version == 0 {
		return fmt.Sprintf("document model %q is not registered", e.DocumentType)
	}
	return fmt.Sprintf("document model %q version %d is not registered", e.DocumentType, e.Version)
}

// DocumentNotFound reports an action on a document that has not been
// created (its document scope is empty).
type DocumentNotFound struct {
	At
}

func (e *DocumentNotFound) Name() string { return NameDocumentNotFound }
func (e *DocumentNotFound) Error() string {
	return fmt.Sprintf("%sdocument %s has not been created", e.At.String(), e.Stream.DocumentID)
}

// DocumentExists reports CREATE_DOCUMENT on a document that already exists.
type DocumentExists struct {
	At
}

func (e *DocumentExists) Name() string { return NameDocumentExists }
func (e *DocumentExists) Error() string {
	return fmt.Sprintf("%sdocument %s already exists", e.At.String(), e.Stream.DocumentID)
}

// DocumentDeleted reports an action on a deleted document. Deletion is final:
// every later action of every scope is refused.
type DocumentDeleted struct {
	At
	DeletedAtUtcMs int64
}

func (e *DocumentDeleted) Name() string { return NameDocumentDeleted }
func (e *DocumentDeleted) Error() string {
	return fmt.Sprintf("%sdocument %s was deleted at %d", e.At.String(), e.Stream.DocumentID, e.DeletedAtUtcMs)
}

// ReducerError reports a reducer that failed for a reason that is not a
// declared business rule: it returned an unclassified error, panicked, or
// produced a state with no JSON form.
type ReducerError struct {
	At
	Panic bool
	Err   error
}

func (e *ReducerError) Name() string  { return NameReducerError }
func (e *ReducerError) Unwrap() error { return e.Err }
func (e *ReducerError) Error() string {
	if e.Panic {
		return fmt.Sprintf("%sreducer panicked: %v", e.At.String(), e.Err)
	}
	return fmt.Sprintf("%sreducer failed: %v", e.At.String(), e.Err)
}

// BusinessRuleViolation is the error a reducer returns when the action is
// well formed but the document's state forbids it (an overdraft, a folder
// that does not exist). Rule is a short stable identifier of the rule.
type BusinessRuleViolation struct {
	At
	Rule    string
	Message string
}

func (e *BusinessRuleViolation) Name() string { return NameBusinessRuleViolation }
func (e *BusinessRuleViolation) Error() string {
	return fmt.Sprintf("%s%s: %s", e.At.String(), e.Rule, e.Message)
}

// Violation builds a BusinessRuleViolation for a reducer.
func Violation(rule, format string, args ...any) *BusinessRuleViolation {
	return &BusinessRuleViolation{Rule: rule, Message: fmt.Sprintf(format, args...)}
}

// HashMismatch reports that replaying an operation did not reproduce the hash
// stored with it: the log and the reducers disagree.
type HashMismatch struct {
	Stream   oplog.StreamKey
	Index    int64
	Expected string // the hash stored with the operation
	Actual   string // the hash of the replayed state
}

func (e *HashMismatch) Name() string { return NameHashMismatch }
func (e *HashMismatch) Error() string {
	return fmt.Sprintf("hash mismatch on %s at index %d: stored %s, replayed %s", e.Stream, e.Index, e.Expected, e.Actual)
}

// MissingUpgradeTransition reports that no registered upgrade leads from one
// version of a document type to the next.
type MissingUpgradeTransition struct {
	DocumentType string
	From, To     int
}

func (e *MissingUpgradeTransition) Name() string { return NameMissingUpgradeTransition }
func (e *MissingUpgradeTransition) Error() string {
	return fmt.Sprintf("no upgrade of %s from version %d to %d is registered", e.DocumentType, e.From, e.To)
}

// DowngradeNotSupported reports a request to move a document or a scope state
// to a lower model version.
type DowngradeNotSupported struct {
	At
	DocumentType string
	From, To     int
}

func (e *DowngradeNotSupported) Name() string { return NameDowngradeNotSupported }
func (e *DowngradeNotSupported) Error() string {
	return fmt.Sprintf("%scannot move %s from version %d down to %d", e.At.String(), e.DocumentType, e.From, e.To)
}

// StreamGap reports operations handed to Replay that do not continue the
// state: the first one's index is not the state's revision, or indexes are not
// contiguous.
type StreamGap struct {
	Stream   oplog.StreamKey
	Expected int64
	Got      int64
}

func (e *StreamGap) Name() string { return NameStreamGap }
func (e *StreamGap) Error() string {
	return fmt.Sprintf("stream %s: expected operation index %d, got %d", e.Stream, e.Expected, e.Got)
}

// SkipBeforeStart reports an operation whose skip supersedes operations
// older than the state Replay started from (a keyframe): the caller must
// replay from an earlier keyframe or from index 0.
type SkipBeforeStart struct {
	Stream     oplog.StreamKey
	Index      int64
	Skip       int64
	StartIndex int64 // the first index Replay had operations for
}

func (e *SkipBeforeStart) Name() string { return NameSkipBeforeStart }
func (e *SkipBeforeStart) Error() string {
	return fmt.Sprintf("stream %s: operation %d skips %d operations, reaching before index %d where the replay started",
		e.Stream, e.Index, e.Skip, e.StartIndex)
}
