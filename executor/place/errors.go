package place

import (
	"fmt"

	oplog "github.com/doclog/doclog/log"
)

// The names of placement's refusals, the closed set sync classifies its
// failures into; a job refused with one ends FAILED under that name and its
// dead letter carries the record error type of the same spelling.
const (
	NameHashMismatch           = "HASH_MISMATCH"
	NameExcessiveShuffle       = "EXCESSIVE_SHUFFLE"
	NameMissingOperations      = "MISSING_OPERATIONS"
	NameNonMonotonicTimestamps = "NON_MONOTONIC_TIMESTAMPS"
)

// HashMismatchError refuses a load whose operation, applied on the state its
// origin had, does not reproduce the origin's hash: the two replicas' states
// differ, or the operation was altered.
type HashMismatchError struct {
	Stream   oplog.StreamKey
	OpID     string
	Index    int64 // the index the operation would have taken
	Expected string
	Actual   string
}

func (e *HashMismatchError) Name() string { return NameHashMismatch }
func (e *HashMismatchError) Error() string {
	return fmt.Sprintf("stream %s: operation %s at index %d: the origin's hash is %s, the state here hashes to %s", e.Stream, e.OpID, e.Index, e.Expected, e.Actual)
}

// ExcessiveShuffleError refuses a placement that would supersede more stored
// operations than the threshold allows.
type ExcessiveShuffleError struct {
	Stream   oplog.StreamKey
	Revision int64 // the stream's revision
	Base     int64 // the first stored index the placement would supersede
	Skip     int64
	Max      int64
}

func (e *ExcessiveShuffleError) Name() string { return NameExcessiveShuffle }
func (e *ExcessiveShuffleError) Error() string {
	return fmt.Sprintf("stream %s at revision %d: placing by timestamp would supersede %d operations from index %d, more than the %d allowed", e.Stream, e.Revision, e.Skip, e.Base, e.Max)
}

// MissingOperationsError refuses a load that does not carry every operation
// its placement needs: its origin indexes leave a gap, it starts past the
// stream's head, or an origin skip reaches before its first operation.
type MissingOperationsError struct {
	Stream   oplog.StreamKey
	Revision int64 // the stream's revision
	Expected int64 // the index the load should have carried
	Got      int64
	Reason   string
}

func (e *MissingOperationsError) Name() string { return NameMissingOperations }
func (e *MissingOperationsError) Error() string {
	return fmt.Sprintf("stream %s at revision %d: operations missing: %s", e.Stream, e.Revision, e.Reason)
}

// NonMonotonicTimestampsError refuses a job placed by timestamp whose
// actions on one scope do not carry strictly increasing timestamps: their
// order would not be their timestamp order.
type NonMonotonicTimestampsError struct {
	Stream         oplog.StreamKey
	OpID           string
	Position       int // among the job's operations on the stream
	TimestampUtcMs int64
	Previous       int64
}

func (e *NonMonotonicTimestampsError) Name() string { return NameNonMonotonicTimestamps }
func (e *NonMonotonicTimestampsError) Error() string {
	return fmt.Sprintf("stream %s: operation %s (position %d) is stamped %d, not after the %d before it; a job placed by timestamp needs strictly increasing timestamps", e.Stream, e.OpID, e.Position, e.TimestampUtcMs, e.Previous)
}
