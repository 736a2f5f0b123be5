package reduce

import (
	"errors"
	"fmt"
	"time"

	"github.com/doclog/doclog/executor/place"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// Error names the executor gives the failures it decides itself. Like the
// model's and the log's names they survive process and topic boundaries
// (ErrorInfo.Name), and FailureType classifies a dead letter by them.
const (
	NameRetriesExhausted        = "RetriesExhausted"
	NameConflictBudgetExhausted = "ConflictBudgetExhausted"
	NameJobTimeout              = "JobTimeout"
	NameDependencyFailed        = "DependencyFailed"
	NameDocumentTypeMismatch    = "DocumentTypeMismatch"
	// NameCancelled names the FAILED result an operator writes for a job
	// not yet applied (doclogctl jobs cancel). The executor never writes
	// it: it finds the result when it reaches the job and announces it.
	NameCancelled = "Cancelled"
	// NamePanic is the name of the cause of a ReducerError whose reducer
	// panicked: the model names both ReducerError, and the cause tells them
	// apart after they crossed a boundary.
	NamePanic = "Panic"
	// NameError names an error that carries no name of its own.
	NameError = "Error"
)

// RetriesExhaustedError fails a job whose transient errors outlasted its
// retries.
type RetriesExhaustedError struct {
	Attempts int
	Last     error
}

func (e *RetriesExhaustedError) Name() string { return NameRetriesExhausted }
func (e *RetriesExhaustedError) Error() string {
	return fmt.Sprintf("gave up after %d attempts: %v", e.Attempts, e.Last)
}

func (e *RetriesExhaustedError) Unwrap() error { return e.Last }

// ConflictBudgetExhaustedError fails a job that lost the race for its
// streams more often than the conflict budget allows.
type ConflictBudgetExhaustedError struct {
	Conflicts int
	Last      error
}

func (e *ConflictBudgetExhaustedError) Name() string { return NameConflictBudgetExhausted }
func (e *ConflictBudgetExhaustedError) Error() string {
	return fmt.Sprintf("lost %d conflicts with concurrent writers: %v", e.Conflicts, e.Last)
}

func (e *ConflictBudgetExhaustedError) Unwrap() error { return e.Last }

// JobTimeoutError fails a job that waited longer than the job timeout.
type JobTimeoutError struct {
	Waited time.Duration
	// Reason is what the job was waiting for.
	Reason string
}

func (e *JobTimeoutError) Name() string { return NameJobTimeout }
func (e *JobTimeoutError) Error() string {
	return fmt.Sprintf("job did not complete within %s: %s", e.Waited.Round(time.Millisecond), e.Reason)
}

// DependencyFailedError fails a job whose queueHint names a failed job.
type DependencyFailedError struct {
	Dependency string
}

func (e *DependencyFailedError) Name() string { return NameDependencyFailed }
func (e *DependencyFailedError) Error() string {
	return fmt.Sprintf("dependency %s failed", e.Dependency)
}

// DocumentTypeMismatchError fails a job whose documentType is not the type
// the document was created with.
type DocumentTypeMismatchError struct {
	DocumentID string
	JobType    string
	StoredType string
}

func (e *DocumentTypeMismatchError) Name() string { return NameDocumentTypeMismatch }
func (e *DocumentTypeMismatchError) Error() string {
	return fmt.Sprintf("document %s is a %s, not a %s", e.DocumentID, e.StoredType, e.JobType)
}

// ErrorInfo flattens err for storage and transport. The name is that of the
// first named error in err's chain (oplog.ErrorName); a recovered panic gets
// a cause named Panic.
func ErrorInfo(err error) oplog.ErrorInfo {
	info := oplog.ErrorInfo{Name: errorName(err), Message: err.Error()}
	var re *model.ReducerError
	if errors.As(err, &re) {
		if re.Panic {
			info.Cause = &oplog.ErrorInfo{Name: NamePanic, Message: fmt.Sprint(re.Err)}
		} else if re.Err != nil {
			c := oplog.ErrorInfo{Name: errorName(re.Err), Message: re.Err.Error()}
			info.Cause = &c
		}
		return info
	}
	if u := errors.Unwrap(err); u != nil {
		if n := errorName(u); n != NameError && n != info.Name {
			c := ErrorInfo(u)
			info.Cause = &c
		}
	}
	return info
}

// errorName is the stable name of err, or NameError when it has none.
func errorName(err error) string {
	if n := oplog.ErrorName(err); n != "" {
		return n
	}
	return NameError
}

// FailureType classifies a failed job's dead letter by the name of its
// error, so a failure read back from the log classifies as it did when it
// happened: the name is all a stored result keeps of the error's type.
func FailureType(info oplog.ErrorInfo) record.ErrorType {
	switch info.Name {
	case model.NameInvalidInput, model.NameUnknownActionType, model.NameDowngradeNotSupported, NameDocumentTypeMismatch:
		return record.ErrInvalidAction
	case model.NameModelNotFound:
		return record.ErrUnknownDocumentType
	case model.NameDocumentNotFound:
		return record.ErrDocumentNotFound
	case model.NameDocumentExists:
		return record.ErrDocumentExists
	case model.NameDocumentDeleted:
		return record.ErrDocumentDeleted
	case model.NameReducerError:
		if info.Cause != nil && info.Cause.Name == NamePanic {
			return record.ErrReducerPanic
		}
		return record.ErrReducer
	case model.NameBusinessRuleViolation, model.NameMissingUpgradeTransition:
		return record.ErrReducer
	case NameDependencyFailed:
		return record.ErrDependencyFailed
	case NameJobTimeout:
		return record.ErrTimeout
	case NameConflictBudgetExhausted:
		return record.ErrConflictBudgetExhausted
	case NameRetriesExhausted:
		return record.ErrRetriesExhausted
	case NameCancelled:
		return record.ErrCancelled
	case NameBranchConflict:
		return record.ErrBranchConflict
	case NameBranchExists:
		return record.ErrBranchExists
	case NameBranchNotFound:
		return record.ErrBranchNotFound
	case NameInvalidForkPoint, NameInvalidPromote, NameBranchesUnsupported:
		return record.ErrInvalidAction
	case record.ErrorName:
		return record.ErrDecode
	case string(record.ErrSignatureInvalid): // the verifier names its refusals by their type
		return record.ErrSignatureInvalid
	case place.NameHashMismatch, place.NameExcessiveShuffle, place.NameMissingOperations, place.NameNonMonotonicTimestamps:
		return record.ErrorType(info.Name) // placement names its refusals by their type
	}
	return record.ErrUnclassified
}
