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

	"github.com/doclog/doclog/executor/reduce"
	oplog "github.com/doclog/doclog/log"
)

// The failures the executor decides itself, and their stable names, are
// reduce's, whose FAILED verdicts carry them; they are named here too for
// the executor's callers.
const (
	NameRetriesExhausted        = reduce.NameRetriesExhausted
	NameConflictBudgetExhausted = reduce.NameConflictBudgetExhausted
	NameJobTimeout              = reduce.NameJobTimeout
	NameDependencyFailed        = reduce.NameDependencyFailed
	NameDocumentTypeMismatch    = reduce.NameDocumentTypeMismatch
	NameCancelled               = reduce.NameCancelled
	NamePanic                   = reduce.NamePanic
	NameError                   = reduce.NameError
)

type (
	// RetriesExhaustedError fails a job whose transient errors outlasted
	// its retries.
	RetriesExhaustedError = reduce.RetriesExhaustedError
	// ConflictBudgetExhaustedError fails a job that lost the race for its
	// streams more often than the conflict budget allows.
	ConflictBudgetExhaustedError = reduce.ConflictBudgetExhaustedError
	// JobTimeoutError fails a job that waited longer than the job timeout.
	JobTimeoutError = reduce.JobTimeoutError
	// DependencyFailedError fails a job whose queueHint names a failed job.
	DependencyFailedError = reduce.DependencyFailedError
	// DocumentTypeMismatchError fails a job whose documentType is not the
	// type the document was created with.
	DocumentTypeMismatchError = reduce.DocumentTypeMismatchError
)

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

// ErrNotRunning is what Ready reports before Start and once the member stopped.
var ErrNotRunning = errors.New("executor is not running")

// crashError carries the error of the after-append hook (Config.afterAppend)
// out of the run.
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
