package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// Error names the executor gives the failures it decides itself. Like the
// model's and the log's names they survive process and topic boundaries
// (ErrorInfo.Name), and failureType classifies a dead letter by them.
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

func (e *JobTimeoutError) Error() string {
	return fmt.Sprintf("job did not complete within %s: %s", e.Waited.Round(time.Millisecond), e.Reason)
}

// DependencyFailedError fails a job whose queueHint names a failed job.
type DependencyFailedError struct {
	Dependency string
}

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

func (e *DocumentTypeMismatchError) Error() string {
	return fmt.Sprintf("document %s is a %s, not a %s", e.DocumentID, e.StoredType, e.JobType)
}

// UnavailableError is what Ready reports while Postgres or Kafka cannot be
// reached: fetching is paused and the batch is retried without limit.
type UnavailableError struct {
	Since time.Time
	Err   error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("a dependency is unavailable since %s: %v", e.Since.UTC().Format(time.RFC3339), e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// ErrNotRunning is what Ready reports before Run started and after it ended.
var ErrNotRunning = errors.New("executor is not running")

// crashError carries the error of the AfterAppend hook out of Run.
type crashError struct{ err error }

func (e *crashError) Error() string { return "stopped by the after-append hook: " + e.err.Error() }
func (e *crashError) Unwrap() error { return e.err }

// produceError reports that the records announcing settled jobs could not be
// produced; they are kept and produced again.
type produceError struct {
	n   int
	err error
}

func (e *produceError) Error() string {
	return fmt.Sprintf("produce %d announcement records: %v", e.n, e.err)
}

func (e *produceError) Unwrap() error { return e.err }

// isUnavailable reports whether err means a dependency (Postgres, Kafka)
// could not be reached or went away: not the job's fault, so it is retried
// without limit and never fails a job.
func isUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if oplog.IsUnavailable(err) { // the log classifies its own driver's errors
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, kgo.ErrRecordTimeout) ||
		errors.Is(err, kgo.ErrRecordRetries) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return false
}

// errorInfo flattens err for storage and transport. The name is the model's
// or the log's stable name when it has one; a recovered panic gets a cause
// named Panic.
func errorInfo(err error) oplog.ErrorInfo {
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
			c := errorInfo(u)
			info.Cause = &c
		}
	}
	return info
}

func errorName(err error) string {
	var (
		re  *RetriesExhaustedError
		cb  *ConflictBudgetExhaustedError
		to  *JobTimeoutError
		df  *DependencyFailedError
		dtm *DocumentTypeMismatchError
		de  *record.DecodeError
	)
	switch {
	case errors.As(err, &re):
		return NameRetriesExhausted
	case errors.As(err, &cb):
		return NameConflictBudgetExhausted
	case errors.As(err, &to):
		return NameJobTimeout
	case errors.As(err, &df):
		return NameDependencyFailed
	case errors.As(err, &dtm):
		return NameDocumentTypeMismatch
	case errors.As(err, &de):
		return record.ErrorName
	}
	if n := model.ErrorName(err); n != "" {
		return n
	}
	return NameError
}

// failureType classifies a failed job's dead letter by the name of its
// error, so a failure read back from the log classifies as it did when it
// happened (seed 001, classifyJobFailure).
func failureType(info oplog.ErrorInfo) record.ErrorType {
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
	case record.ErrorName:
		return record.ErrDecode
	}
	return record.ErrUnclassified
}
