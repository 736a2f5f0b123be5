// Package log owns doclog's operation log: the types every stage shares
// (streams, actions, operations, job results, consistency tokens), the Store
// interface a backend implements, and the typed errors an append reports.
//
// Import it with an alias (oplog) so it never shadows the standard library's
// log; doclog logs through zap.
//
// Conventions used everywhere: in the code, in the records on the topics and
// in both HTTP APIs:
//   - index: the 0-based position of an operation in its stream.
//   - revision: the number of operations in a stream, which is also the index
//     the next operation takes (0 when the stream is empty).
//   - keyframes and consistency-token coordinates name the index of the last
//     operation they include.
//   - skip: an operation with skip n supersedes the n operations before it
//     when state is rebuilt.
package log

import (
	"encoding/json"
	"fmt"
	"time"
)

// Scopes every document has. The document scope is the system scope: create,
// upgrade, delete, relationships, name and slug.
const (
	ScopeDocument = "document"
	ScopeGlobal   = "global"
	ScopeLocal    = "local"

	// DefaultBranch is the branch a stream uses when none is named.
	DefaultBranch = "main"
)

// StreamKey names one stream: the operations of one scope of one document on
// one branch.
type StreamKey struct {
	DocumentID string `json:"documentId"`
	Scope      string `json:"scope"`
	Branch     string `json:"branch"`
}

// String renders the key as documentId/scope/branch for errors and logs.
func (k StreamKey) String() string {
	return k.DocumentID + "/" + k.Scope + "/" + k.Branch
}

// Action is what a producer asks a document to do. ID is non-empty and unique
// per action; the log refuses an operation whose action has no id.
type Action struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Scope          string          `json:"scope"`
	TimestampUtcMs int64           `json:"timestampUtcMs"`
	Input          json.RawMessage `json:"input,omitempty"`
	Context        json.RawMessage `json:"context,omitempty"`
	// Signature, when present, is the producer's signature of the action
	// (package signing defines what it covers and checks it). It is stored
	// with the operation and read back with it.
	Signature *Signature `json:"signature,omitempty"`
}

// Signature is an action's signature: the key that made it (KeyID, an id of
// the verifier's key set), the algorithm (ed25519) and the signature bytes
// in standard base64 (Value).
type Signature struct {
	KeyID     string `json:"keyId"`
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
}

// Operation is an action applied to a stream at an index, with the hash of
// the scope state after it and the model version whose reducer produced it.
// Ordinal, TxID and WrittenAt are assigned by the store.
type Operation struct {
	OpID           string    `json:"opId"`
	JobID          string    `json:"jobId"`
	DocumentID     string    `json:"documentId"`
	DocumentType   string    `json:"documentType"`
	Scope          string    `json:"scope"`
	Branch         string    `json:"branch"`
	Index          int64     `json:"index"`
	Skip           int64     `json:"skip"`
	Hash           string    `json:"hash"`
	TimestampUtcMs int64     `json:"timestampUtcMs"`
	Version        int       `json:"version"`
	Action         Action    `json:"action"`
	Ordinal        int64     `json:"ordinal,omitempty"`
	TxID           uint64    `json:"txid,omitempty"`
	WrittenAt      time.Time `json:"writtenAt,omitzero"`
}

// Stream is the key of the stream the operation belongs to.
func (o *Operation) Stream() StreamKey {
	return StreamKey{DocumentID: o.DocumentID, Scope: o.Scope, Branch: o.Branch}
}

// StreamAppend is the part of an AppendRequest that writes one stream:
// Operations take indexes ExpectedRevision, ExpectedRevision+1, … in order.
type StreamAppend struct {
	Stream           StreamKey   `json:"stream"`
	ExpectedRevision int64       `json:"expectedRevision"`
	Operations       []Operation `json:"operations"`
}

// ConditionStream is one read-set stream and the revision observed on it.
type ConditionStream struct {
	Stream   StreamKey `json:"stream"`
	Revision int64     `json:"revision"`
}

// AppendCondition is a read-set: the append fails, writing nothing, if any of
// these streams has grown past its recorded revision.
type AppendCondition struct {
	Streams []ConditionStream `json:"streams"`
}

// JobStatus is the lifecycle state of a job as reported to clients. Only
// WriteReady and Failed are stored; Pending is the absence of a result and
// ReadReady is derived from the document view.
type JobStatus string

const (
	JobPending    JobStatus = "PENDING"
	JobWriteReady JobStatus = "WRITE_READY"
	JobReadReady  JobStatus = "READ_READY"
	JobFailed     JobStatus = "FAILED"
)

// ErrorInfo is an error flattened for storage and transport. Name survives
// process and topic boundaries and drives failure classification.
type ErrorInfo struct {
	Name    string     `json:"name"`
	Message string     `json:"message"`
	Cause   *ErrorInfo `json:"cause,omitempty"`
}

// Error makes ErrorInfo usable as an error after it crossed a boundary.
func (e *ErrorInfo) Error() string { return e.Name + ": " + e.Message }

// Coordinate names the index of the last operation a job wrote to a stream.
type Coordinate struct {
	DocumentID string `json:"documentId"`
	Scope      string `json:"scope"`
	Branch     string `json:"branch"`
	Index      int64  `json:"index"`
}

// Stream is the key of the coordinate's stream.
func (c Coordinate) Stream() StreamKey {
	return StreamKey{DocumentID: c.DocumentID, Scope: c.Scope, Branch: c.Branch}
}

// ConsistencyToken is what a job wrote; a read carrying it waits until the
// projection serving the read has reached every coordinate.
type ConsistencyToken struct {
	Coordinates []Coordinate `json:"coordinates"`
}

// StreamRange is the contiguous run of indexes a job wrote to one stream,
// both ends included.
type StreamRange struct {
	Stream    StreamKey `json:"stream"`
	FromIndex int64     `json:"fromIndex"`
	ToIndex   int64     `json:"toIndex"`
}

// JobOutcome settles one job inside an AppendRequest. A WriteReady job's
// operations are the request's operations carrying its JobID; a Failed job
// writes no operation, only its result, under the request's guards.
type JobOutcome struct {
	JobID        string      `json:"jobId"`
	Status       JobStatus   `json:"status"`
	ErrorHistory []ErrorInfo `json:"errorHistory,omitempty"`
	// Load is what a WriteReady load job's placement did, stored with its
	// result; nil for any other job.
	Load *LoadSummary `json:"load,omitempty"`
}

// LoadSummary is what a load job's placement did, one entry per stream its
// operations name, in the order they were placed (the document scope
// first). It counts rather than lists operation ids, so a result stays
// small however large the load.
type LoadSummary struct {
	Streams []LoadStream `json:"streams"`
}

// LoadStream counts what a load's placement did in one stream. Stored,
// Replayed and Superseded add up to the load's operations of the stream.
type LoadStream struct {
	Stream StreamKey `json:"stream"`
	// Stored is how many of the load's operations were written, appended
	// at the head or merged by timestamp.
	Stored int64 `json:"stored"`
	// Replayed is how many the stream already held (same opId): not
	// written again.
	Replayed int64 `json:"replayed"`
	// Superseded is how many the origin's own skips superseded within the
	// load: not placed.
	Superseded int64 `json:"superseded"`
	// Reshuffled is how many stored operations a merge superseded and
	// re-appended after the head, merged with the new ones; 0 for an
	// append.
	Reshuffled int64 `json:"reshuffled"`
	// Skip is the skip of the first operation a merge appended (the
	// revision before the load minus the index of the first operation it
	// superseded); 0 for an append or a load of replays only.
	Skip int64 `json:"skip"`
}

// JobResult is the stored result of a job: written once, in the transaction
// that wrote its operations (or its failure), and never changed after.
type JobResult struct {
	JobID        string           `json:"jobId"`
	DocumentID   string           `json:"documentId"`
	Status       JobStatus        `json:"status"`
	Streams      []StreamRange    `json:"streams,omitempty"`
	Token        ConsistencyToken `json:"consistencyToken"`
	ErrorHistory []ErrorInfo      `json:"errorHistory,omitempty"`
	// Load is what a WRITE_READY load job's placement did; nil for any
	// other job, and for a load job stored before results carried it.
	Load      *LoadSummary `json:"load,omitempty"`
	CreatedAt time.Time    `json:"createdAt,omitzero"`
}

// Keyframe is a stream's state after the operation at Index (inclusive),
// stored so state can be rebuilt without replaying from index 0.
type Keyframe struct {
	Stream       StreamKey       `json:"stream"`
	DocumentType string          `json:"documentType"`
	Index        int64           `json:"index"`
	Version      int             `json:"version"`
	State        json.RawMessage `json:"state"`
	Hash         string          `json:"hash"`
	CreatedAt    time.Time       `json:"createdAt,omitzero"`
}

// AppendRequest writes one document: all of its streams, job outcomes and
// keyframes commit together or not at all.
type AppendRequest struct {
	DocumentID   string
	DocumentType string
	// Jobs are the jobs this request settles. Every operation's JobID must
	// name one of them with status WriteReady.
	Jobs []JobOutcome
	// Streams are the streams written, each with its expected revision.
	// A request that only fails jobs still lists the streams it reduced
	// against (with no operations) so the failure is written under the
	// same head guard.
	Streams []StreamAppend
	// Condition is the read-set; every executor request includes the
	// document's document-scope stream. Nil means no read-set.
	Condition *AppendCondition
	// Keyframes are written with the operations, at most one per stream.
	Keyframes []Keyframe
	// Branch, when set, is written to the branch registry (inserted or
	// replaced) in the same transaction, and only if the request lands: a
	// fork, promote or delete-branch job's registry change commits with
	// its operations and result or not at all. A backend without a
	// registry refuses such a request with *InvalidRequest.
	Branch *BranchRef
}

// AppendResult is the outcome of one request of an Append batch.
type AppendResult struct {
	DocumentID string
	// Operations are the stored rows: freshly written, or on a replay the
	// rows stored before.
	Operations []Operation
	// Jobs are the stored results of the request's jobs.
	Jobs []JobResult
	// Replayed reports that nothing was written because the request had
	// already been applied.
	Replayed bool
	// Err is nil, or one of *RevisionMismatch, *AppendConditionFailed,
	// *DuplicateOperation, *InvalidRequest, *JobAlreadySettled. Nothing of the request was
	// written when it is set.
	Err error
}

// Revisions is a document's revision per scope on one branch and the largest
// operation timestamp across those scopes.
type Revisions struct {
	Revision        map[string]int64 `json:"revision"`
	LatestTimestamp int64            `json:"latestTimestamp"`
}

// Cursor is an opaque position in the global tail. The zero value is the
// start of the log.
type Cursor string

// TailPage is a page of the global tail and the cursor after its last row.
type TailPage struct {
	Operations []Operation
	Next       Cursor
}

// TailEnd is where the commit-safe tail ends at one moment (Store.TailEnd).
type TailEnd struct {
	// Horizon is the oldest transaction id the tail has not passed: every
	// transaction below it has ended.
	Horizon uint64
	// Last is the transaction id of the tail's last row below Horizon, 0
	// when the log is empty.
	Last uint64
}

// DocumentPage is a page of document ids in code-point order and the cursor
// for the next page ("" when there is none).
type DocumentPage struct {
	DocumentIDs []string
	Next        string
}

// ValidateOperation checks what the log requires of every operation before it
// is sent to a backend.
func ValidateOperation(op *Operation) error {
	switch {
	case op.Action.ID == "":
		return fmt.Errorf("operation %s at index %d of %s: action has no id", op.OpID, op.Index, op.Stream())
	case op.OpID == "":
		return fmt.Errorf("operation at index %d of %s: empty opId", op.Index, op.Stream())
	case op.JobID == "":
		return fmt.Errorf("operation %s at index %d of %s: empty jobId", op.OpID, op.Index, op.Stream())
	case op.Skip < 0:
		return fmt.Errorf("operation %s at index %d of %s: negative skip %d", op.OpID, op.Index, op.Stream(), op.Skip)
	case op.Skip > op.Index:
		return fmt.Errorf("operation %s at index %d of %s: skip %d reaches before index 0", op.OpID, op.Index, op.Stream(), op.Skip)
	}
	return nil
}

// BranchRef is a document branch's entry in the branch registry: where a
// forked branch came from, and whether it was deleted. A branch whose
// streams exist without an entry (every branch written before the registry,
// and main) is an ordinary live branch with no lineage.
type BranchRef struct {
	DocumentID string `json:"documentId"`
	Branch     string `json:"branch"`
	// Base is the branch this one was forked from; "" when it was not
	// forked.
	Base string `json:"base,omitempty"`
	// BasePoint and OwnPoint say, per scope, that the first OwnPoint[s]
	// operations of this branch reproduce the state of the first
	// BasePoint[s] operations of Base. A fork sets both to the fork point;
	// a promote onto Base moves them to the two tips it made equal, so the
	// next promote re-appends only what came after.
	BasePoint map[string]int64 `json:"basePoint,omitempty"`
	OwnPoint  map[string]int64 `json:"ownPoint,omitempty"`
	// ForkPoint is the fork point per scope: the revisions of Base the
	// branch started from. It never changes after the fork.
	ForkPoint map[string]int64 `json:"forkPoint,omitempty"`
	// Deleted is set by a delete-branch job: reads of the branch answer
	// not found and writes to it fail; its operations stay in the log.
	Deleted bool `json:"deleted,omitempty"`
	// JobID is the job that wrote the entry last.
	JobID     string    `json:"jobId,omitempty"`
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// BranchInfo is one branch of a document as the registry and the log know
// it: its entry (only DocumentID and Branch are set for a branch without
// one) and its tip, the revision of each non-empty scope.
type BranchInfo struct {
	BranchRef
	Tips map[string]int64 `json:"tips"`
}
