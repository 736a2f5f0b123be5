// Package projectors owns the shared projector runner: it consumes the
// write-ready topic as one consumer group per projector, recomputes every
// stream's state with the model SDK from the stored head and checks each
// resulting hash against the operation's, heals gaps from the operation log,
// quarantines streams that cannot be verified, and commits the projection's
// table changes together with a fenced per-partition checkpoint in one
// database transaction. A reconciler compares stream heads in the log with
// the projection and heals the difference, which is the only way a lost last
// record of a document is noticed.
//
// Projectors (docview, indexer, analytics, and those of other modules)
// implement Projector, declare what they follow with a Filter and only
// derive their tables from verified changes; the database seam is Store and Tx, whose
// Postgres implementation lives in projectors/pgproj, so this package never
// imports a database driver.
package projectors

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// Projector derives read tables from verified stream changes. The runner
// calls Apply inside the batch transaction, after the epoch check and before
// the checkpoint moves, so the projection, the stream heads and the
// checkpoint commit together or not at all.
type Projector interface {
	// Name keys the projector's checkpoints, heads and quarantines and names
	// its consumer group; it must be stable across releases.
	Name() string
	// Filter is what the projector follows: document types, scopes and
	// branches (see Filter). The runner asks it once, when it is built,
	// and verifies, stores heads of and hands over only the streams it
	// follows, so a projector of one document type's global scope pays
	// nothing but decoding for the rest of the log.
	Filter() Filter
	// Apply writes the changes through tx. Every change starts exactly at
	// the stream's stored head (Change.From), so Apply never needs its own
	// last-index check for correctness, but each row it writes carries the
	// stream's last index so reads can honour consistency tokens.
	Apply(ctx context.Context, tx Tx, changes []Change) error
}

// RunnerConfigurer is a projector that sets up the runner it runs under
// (the analytics projector: polls and fetches sized to its inserts). Who
// builds a runner for a projector passes the Config through RunnerConfig
// when the projector is one.
type RunnerConfigurer interface {
	Projector
	// RunnerConfig returns rc set up for this projector, keeping the
	// fields rc already sets.
	RunnerConfig(rc Config) Config
}

// Head is the verified head of one stream as a projector stored it.
type Head struct {
	Stream       oplog.StreamKey
	DocumentType string
	// LastIndex is the index of the last applied operation, -1 when empty.
	LastIndex int64
	Hash      string
	Version   int
	// State is the scope state as canonical JSON: after LastIndex, or
	// after StateAt's index when that is set. A head stored without State
	// (PutHeadsIfNewer, QueueHeadsIfNewer) keeps the state stored before
	// it, whose head becomes the stored head's StateAt; a stream's first
	// stored head carries its state.
	State json.RawMessage
	// StateAt names the earlier head of the stream that State is the state
	// after, when the store holds a state older than the head (nil: State
	// is the head's own). The runner stores a large state only every so
	// often, and rebuilds the head's state by replaying the log from it.
	StateAt *HeadRef
	// LastTimestampUtcMs is the timestamp of the operation at LastIndex.
	LastTimestampUtcMs int64
}

// HeadRef names a head without its state. Two heads with the same index,
// hash and model version have the same state: the hash is a digest of it.
type HeadRef struct {
	LastIndex int64
	Hash      string
	Version   int
}

// Ref returns the head's reference.
func (h *Head) Ref() HeadRef {
	return HeadRef{LastIndex: h.LastIndex, Hash: h.Hash, Version: h.Version}
}

// StreamState rebuilds the model SDK's state from the head's State: the
// head's own, or the earlier one of StateAt, which is what it returns then.
func (h *Head) StreamState() (*model.StreamState, error) {
	at := h.Ref()
	if h.StateAt != nil {
		at = *h.StateAt
	}
	st := model.NewStreamState(h.Stream, h.DocumentType)
	if at.LastIndex < 0 {
		return st, nil
	}
	v, err := model.DecodeJSON(h.State)
	if err != nil {
		return nil, fmt.Errorf("decode stored state of %s at index %d: %w", h.Stream, at.LastIndex, err)
	}
	st.Revision = at.LastIndex + 1
	st.Version = at.Version
	st.State = v
	st.Hash = at.Hash
	return st, nil
}

// Change is one stream advanced by a batch: the operations From+1..To, all
// verified against their hashes, and the state after the last of them.
type Change struct {
	Stream       oplog.StreamKey
	DocumentType string
	// From is the stored last index before the change (-1: the stream was
	// empty); the operations are From+1 .. Head.LastIndex.
	From       int64
	Operations []oplog.Operation
	// State is the verified state after the last operation; Head.State is
	// its canonical JSON. The runner goes on applying to it after Apply
	// returns: a projector that keeps it takes a Clone.
	State *model.StreamState
	Head  Head
}

// Quarantine is a stream the projector stopped applying: an operation could
// not be applied or its recomputed hash disagreed with the stored one. Its
// later operations wait until the quarantine is lifted.
type Quarantine struct {
	Stream oplog.StreamKey
	// Index is the operation that failed.
	Index int64
	// ErrorName is the stable name of the failure (HashMismatch,
	// ReducerError, ...), Reason its message.
	ErrorName string
	Reason    string
	// Since is when the stream was quarantined (zero for one not stored
	// yet).
	Since time.Time
}

// Fence names the partition whose checkpoint a batch moves and the epoch
// its member holds; the store refuses the batch when the epoch is stale.
type Fence struct {
	Projector string
	Partition int32
	Epoch     int64
	// NextOffset is the offset the checkpoint moves to when the batch
	// commits: the offset after the batch's last record.
	NextOffset int64
}

// Checkpoint is a partition's stored position and the epoch of its owner.
type Checkpoint struct {
	Partition int32
	// NextOffset is the next record to consume, -1 when the projector has
	// never committed this partition.
	NextOffset int64
	Epoch      int64
}

// Tx is the batch transaction as the runner and projectors see it. Its
// Postgres implementation (projectors/pgproj) gives projector stores the
// driver transaction underneath.
type Tx interface {
	// Claim serializes every writer of the streams (the consumer of their
	// partition and the reconciler) until the transaction ends — locks are
	// taken in a fixed order so writers never deadlock — and returns the
	// stored heads of the streams that have one and their quarantines. A
	// stored head equal to the one the caller holds for its stream (held,
	// possibly nil) comes without its State: the caller has it already.
	Claim(ctx context.Context, projector string, streams []oplog.StreamKey, held map[oplog.StreamKey]HeadRef) (map[oplog.StreamKey]Head, map[oplog.StreamKey]Quarantine, error)
	// Heads returns the stored heads of the streams that have one, without
	// locking them.
	Heads(ctx context.Context, projector string, streams []oplog.StreamKey) (map[oplog.StreamKey]Head, error)
	// PutHeadsIfNewer stores heads whose LastIndex is above the stored one
	// and reports how many rows it wrote. A head without State keeps the
	// stored state (Head.State); its StateAt is ignored.
	PutHeadsIfNewer(ctx context.Context, projector string, heads []Head) (int, error)
	// QueueHeadsIfNewer is PutHeadsIfNewer sent with the transaction's
	// commit, saving a round trip; its failure fails the commit.
	QueueHeadsIfNewer(projector string, heads []Head)
	// Quarantine records a quarantine (the first one of a stream is kept).
	Quarantine(ctx context.Context, projector string, q Quarantine) error
}

// Store is the runner's database.
type Store interface {
	// Assign bumps the epoch of a partition's checkpoint (creating it) and
	// returns it: from now on only the holder of the new epoch may move it.
	Assign(ctx context.Context, projector string, partition int32) (Checkpoint, error)
	// InTx runs fn in one transaction. With fences (of one projector, one
	// per partition), every partition's epoch is checked before any other
	// statement of the transaction, holding the checkpoint rows until the
	// end, and *FencedError names a stale one, with nothing written; each
	// checkpoint moves to its fence's NextOffset in the same transaction.
	// The check may share a round trip with fn's first statements, so fn
	// may run before it fails: that statement then returns the
	// *FencedError, and nothing fn did is committed. Without fences, the
	// transaction is neither fenced nor checkpointed (the reconciler's).
	InTx(ctx context.Context, fences []Fence, fn func(Tx) error) error
	// LastIndexes returns the stored last index of every stream the
	// projector keeps for the documents.
	LastIndexes(ctx context.Context, projector string, documentIDs []string) (map[oplog.StreamKey]int64, error)
	// Quarantines lists the projector's quarantined streams.
	Quarantines(ctx context.Context, projector string) ([]Quarantine, error)
	// QuarantinesOf returns the quarantines among the streams, for reads
	// that must answer 409 rather than wait on a stream that cannot move.
	QuarantinesOf(ctx context.Context, projector string, streams []oplog.StreamKey) (map[oplog.StreamKey]Quarantine, error)
	// Release lifts a stream's quarantine; the reconciler then heals it
	// from the log. It reports whether there was one.
	Release(ctx context.Context, projector string, stream oplog.StreamKey) (bool, error)
	// Checkpoints lists the projector's partitions.
	Checkpoints(ctx context.Context, projector string) ([]Checkpoint, error)
}

// FencedError reports a batch refused because another member was assigned
// the partition since this one was: its epoch is stale.
type FencedError struct {
	Projector string
	Partition int32
	Epoch     int64 // the epoch the batch held
	Current   int64 // the stored epoch
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("projector %s partition %d: epoch %d is stale (current %d): the partition moved to another member",
		e.Projector, e.Partition, e.Epoch, e.Current)
}

// QuarantinedError reports a read or a consistency-token wait on a
// quarantined stream: the projection cannot reach the requested index until
// the quarantine is lifted (the read store answers 409).
type QuarantinedError struct {
	Projector string
	Quarantine
}

func (e *QuarantinedError) Error() string {
	return fmt.Sprintf("projector %s: stream %s is quarantined at index %d: %s: %s",
		e.Projector, e.Stream, e.Index, e.ErrorName, e.Reason)
}
