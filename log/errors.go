package log

import (
	"errors"
	"fmt"
)

// Error names, stable across process and topic boundaries (ErrorInfo.Name).
const (
	NameRevisionMismatch      = "RevisionMismatch"
	NameAppendConditionFailed = "AppendConditionFailed"
	NameDuplicateOperation    = "DuplicateOperation"
	NameInvalidRequest        = "InvalidRequest"
	NameJobAlreadySettled     = "JobAlreadySettled"
)

// Named is implemented by every error of doclog that has a stable name: the
// log's, the model's, the record decoder's and the executor's own failures.
// The name crosses process and topic boundaries (ErrorInfo.Name, dead
// letters, quarantines, metrics labels), so once released it never changes.
type Named interface {
	error
	Name() string
}

// ErrorName returns the name of the first Named error in err's chain, or ""
// when there is none. It is the one lookup: an error type gets a name by
// implementing Named, never by a case here.
func ErrorName(err error) string {
	var n Named
	if errors.As(err, &n) {
		return n.Name()
	}
	return ""
}

// RevisionMismatch reports that a stream's head was not where the append
// expected it: another writer got there first, or a position in the stream is
// already taken by a different operation. A conflict, not a fault: reload and
// retry.
type RevisionMismatch struct {
	Stream   StreamKey
	Expected int64 // the revision the append expected
	Actual   int64 // the stream's revision when the append was refused
	// OpID and Index are set when a specific position is taken by another
	// operation (same stream and index, different opId).
	OpID  string
	Index int64
}

func (e *RevisionMismatch) Name() string { return NameRevisionMismatch }
func (e *RevisionMismatch) Error() string {
	if e.OpID != "" {
		return fmt.Sprintf("revision mismatch on %s: index %d is taken by another operation than %s (expected revision %d, actual %d)",
			e.Stream, e.Index, e.OpID, e.Expected, e.Actual)
	}
	return fmt.Sprintf("revision mismatch on %s: expected revision %d, actual %d", e.Stream, e.Expected, e.Actual)
}

// AppendConditionFailed reports that a read-set stream grew past the revision
// recorded for it. A conflict, not a fault: retry against the new heads.
type AppendConditionFailed struct {
	Stream   StreamKey
	Recorded int64 // the revision the read-set recorded
	Actual   int64 // the stream's revision when the append was refused
}

func (e *AppendConditionFailed) Name() string { return NameAppendConditionFailed }
func (e *AppendConditionFailed) Error() string {
	return fmt.Sprintf("append condition failed on %s: recorded revision %d, actual %d", e.Stream, e.Recorded, e.Actual)
}

// DuplicateOperation reports that an operation's identity (opId, index, skip)
// is already stored in another stream. Never reported as RevisionMismatch.
type DuplicateOperation struct {
	Stream   StreamKey // the stream the append tried to write
	Existing StreamKey // the stream that already holds the identity
	OpID     string
	Index    int64
	Skip     int64
}

func (e *DuplicateOperation) Name() string { return NameDuplicateOperation }
func (e *DuplicateOperation) Error() string {
	return fmt.Sprintf("duplicate operation %s (index %d, skip %d) on %s: already stored in %s",
		e.OpID, e.Index, e.Skip, e.Stream, e.Existing)
}

// InvalidRequest reports a request the log refuses whatever the state of the
// streams: an action without an id, indexes that do not follow the expected
// revision, an operation naming a job the request does not settle.
type InvalidRequest struct {
	DocumentID string
	Reason     string
}

func (e *InvalidRequest) Name() string { return NameInvalidRequest }
func (e *InvalidRequest) Error() string {
	return fmt.Sprintf("invalid append request for document %s: %s", e.DocumentID, e.Reason)
}

// JobAlreadySettled reports that some, but not all, of a request's jobs
// already have results: another writer settled them first. A conflict: the
// caller looks the jobs up again and reduces only the unsettled ones.
type JobAlreadySettled struct {
	DocumentID string
	JobID      string
	Status     JobStatus
}

func (e *JobAlreadySettled) Name() string { return NameJobAlreadySettled }
func (e *JobAlreadySettled) Error() string {
	return fmt.Sprintf("job %s of document %s already has a result (%s)", e.JobID, e.DocumentID, e.Status)
}

// IsConflict reports whether err is a concurrency conflict that a retry
// against fresh stream heads can resolve (and that is exempt from retry
// limits).
func IsConflict(err error) bool {
	var rm *RevisionMismatch
	var cf *AppendConditionFailed
	var js *JobAlreadySettled
	return errors.As(err, &rm) || errors.As(err, &cf) || errors.As(err, &js)
}

// Unavailable reports that the log's database could not be reached or lost
// the connection mid-request: nothing is wrong with the request. Callers
// retry once the database is back, without counting it against a job's
// retries: an outage is not the job's fault. It has no name of its own, since
// it never settles a job: what it wraps is the driver's error.
type Unavailable struct {
	Err error
}

func (e *Unavailable) Error() string { return "operation log unavailable: " + e.Err.Error() }
func (e *Unavailable) Unwrap() error { return e.Err }

// IsUnavailable reports whether err is, or wraps, *Unavailable.
func IsUnavailable(err error) bool {
	var u *Unavailable
	return errors.As(err, &u)
}
