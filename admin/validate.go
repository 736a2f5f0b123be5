package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// IssueKind classifies what a validation found.
type IssueKind string

const (
	// IssueStreamOrder: indexes are not contiguous from 0 (an operation is
	// missing).
	IssueStreamOrder IssueKind = "stream-order"
	// IssueTimestampOrder: an operation's action timestamp is before the
	// previous one's. Only ever a note: concurrent submits of one document
	// are stamped by their clients and committed in arrival order, so
	// healthy streams have them.
	IssueTimestampOrder IssueKind = "timestamp-order"
	// IssueHash: replaying the stream does not reproduce a stored hash, or
	// an operation cannot be replayed at all.
	IssueHash IssueKind = "hash"
	// IssueKeyframe: a keyframe's state does not hash to its hash, or its
	// hash differs from the replayed state at its index, or it lies beyond
	// the stream's head.
	IssueKeyframe IssueKind = "keyframe"
	// IssueSnapshot: a projection's snapshot disagrees with the replay.
	IssueSnapshot IssueKind = "snapshot"
)

// Issue is one finding of ValidateDocument.
type Issue struct {
	Kind    IssueKind       `json:"kind"`
	Stream  oplog.StreamKey `json:"stream"`
	Index   int64           `json:"index"`
	Message string          `json:"message"`
}

// StreamReport summarises one validated stream.
type StreamReport struct {
	Stream    oplog.StreamKey `json:"stream"`
	Revision  int64           `json:"revision"`
	Hash      string          `json:"hash"`
	Keyframes int             `json:"keyframes"`
}

// ValidationReport is the outcome of ValidateDocument. Consistent is true
// when Issues is empty; Notes are observations that are not problems.
type ValidationReport struct {
	DocumentID string         `json:"documentId"`
	Branch     string         `json:"branch"`
	Consistent bool           `json:"consistent"`
	Streams    []StreamReport `json:"streams"`
	Issues     []Issue        `json:"issues"`
	Notes      []Issue        `json:"notes"`
}

// Snapshot is a projection's copy of a stream's head.
type Snapshot struct {
	Index        int64
	Hash         string
	State        json.RawMessage
	DocumentType string
	// IsDeleted is the projection's deleted flag, for the document scope.
	IsDeleted bool
}

// SnapshotSource gives a projection's snapshot of a stream, for comparing
// projections with the log. ok is false when it holds none.
type SnapshotSource interface {
	Snapshot(ctx context.Context, stream oplog.StreamKey) (snap Snapshot, ok bool, err error)
}

// ErrDocumentNotFound reports a document with no operations on the branch.
var ErrDocumentNotFound = errors.New("document not found")

// ValidateDocument replays every stream of a document from index 0 and
// reports stream-order, hash, keyframe and (with snapshots) snapshot issues,
// and out-of-order timestamps as notes. It reads only; an error is returned
// for failures to read, never for what it finds.
func ValidateDocument(ctx context.Context, store oplog.Store, reg *model.Registry, snapshots SnapshotSource, documentID, branch string) (ValidationReport, error) {
	rep, _, err := validateDocument(ctx, store, reg, snapshots, documentID, branch)
	return rep, err
}

// replayedStream is one stream as validateDocument read and replayed it,
// for the checks verify adds on top.
type replayedStream struct {
	Stream oplog.StreamKey
	Ops    []oplog.Operation
	// State is the replayed head; nil when the stream has a gap or does
	// not replay, which the report's issues say.
	State *model.StreamState
}

func validateDocument(ctx context.Context, store oplog.Store, reg *model.Registry, snapshots SnapshotSource, documentID, branch string) (ValidationReport, []replayedStream, error) {
	rep := ValidationReport{DocumentID: documentID, Branch: branch, Issues: []Issue{}, Notes: []Issue{}}
	revs, err := store.Revisions(ctx, documentID, branch)
	if err != nil {
		return rep, nil, fmt.Errorf("validating %s: %w", documentID, err)
	}
	if len(revs.Revision) == 0 {
		return rep, nil, fmt.Errorf("validating %s on %s: %w", documentID, branch, ErrDocumentNotFound)
	}
	var streams []replayedStream
	for _, scope := range sortedScopes(revs.Revision) {
		k := oplog.StreamKey{DocumentID: documentID, Scope: scope, Branch: branch}
		sr, rs, err := validateStream(ctx, store, reg, snapshots, k, &rep)
		if err != nil {
			return rep, nil, err
		}
		rep.Streams = append(rep.Streams, sr)
		streams = append(streams, rs)
	}
	rep.Consistent = len(rep.Issues) == 0
	return rep, streams, nil
}

func sortedScopes(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	// The document scope first: its state governs how the others reduce.
	sort.Slice(out, func(i, j int) bool {
		if (out[i] == oplog.ScopeDocument) != (out[j] == oplog.ScopeDocument) {
			return out[i] == oplog.ScopeDocument
		}
		return out[i] < out[j]
	})
	return out
}

func validateStream(ctx context.Context, store oplog.Store, reg *model.Registry, snapshots SnapshotSource, k oplog.StreamKey, rep *ValidationReport) (StreamReport, replayedStream, error) {
	add := func(kind IssueKind, idx int64, format string, args ...any) {
		is := Issue{Kind: kind, Stream: k, Index: idx, Message: fmt.Sprintf(format, args...)}
		if kind == IssueTimestampOrder {
			rep.Notes = append(rep.Notes, is)
			return
		}
		rep.Issues = append(rep.Issues, is)
	}
	ops, err := store.ReadStream(ctx, k, 0, 0)
	if err != nil {
		return StreamReport{}, replayedStream{}, fmt.Errorf("validating %s: %w", k, err)
	}
	rs := replayedStream{Stream: k, Ops: ops}
	kfs, err := store.ListKeyframes(ctx, k)
	if err != nil {
		return StreamReport{}, rs, fmt.Errorf("validating %s: %w", k, err)
	}
	sr := StreamReport{Stream: k, Revision: int64(len(ops)), Keyframes: len(kfs)}
	docType := ""
	if len(ops) > 0 {
		docType = ops[0].DocumentType
	}

	for i, op := range ops {
		if op.Index != int64(i) {
			add(IssueStreamOrder, int64(i), "index %d is missing: the operation after index %d has index %d, indexes are not contiguous from 0", i, i-1, op.Index)
			return sr, rs, nil // nothing after a gap can be replayed
		}
		if i > 0 && op.Skip == 0 && op.TimestampUtcMs < ops[i-1].TimestampUtcMs {
			add(IssueTimestampOrder, op.Index, "timestamp %d is before the previous operation's %d (concurrent submits are committed in arrival order)", op.TimestampUtcMs, ops[i-1].TimestampUtcMs)
		}
	}

	// Replay in runs that end at each keyframe's index, comparing as we go.
	kfAt := make(map[int64]oplog.Keyframe, len(kfs))
	for _, kf := range kfs {
		if kf.Index >= int64(len(ops)) {
			add(IssueKeyframe, kf.Index, "keyframe at index %d is beyond the stream's last index %d", kf.Index, len(ops)-1)
			continue
		}
		if _, err := model.FromKeyframe(kf); err != nil {
			add(IssueKeyframe, kf.Index, "keyframe state does not verify: %v", err)
			continue
		}
		kfAt[kf.Index] = kf
	}
	st := model.NewStreamState(k, docType)
	if err := reg.Replay(st, ops); err != nil {
		idx := int64(-1)
		var hm *model.HashMismatch
		if errors.As(err, &hm) {
			idx = hm.Index
		}
		add(IssueHash, idx, "%s", err.Error())
		return sr, rs, nil
	}
	sr.Hash = st.Hash
	rs.State = st
	// Replay proved every stored hash, so a keyframe is right exactly when
	// its hash is the stored hash of the operation it is labelled by.
	for _, kf := range kfs {
		if want, ok := kfAt[kf.Index]; ok && want.Hash != ops[kf.Index].Hash {
			add(IssueKeyframe, kf.Index, "keyframe hash %s differs from the replayed state's %s", want.Hash, ops[kf.Index].Hash)
		}
	}

	if snapshots != nil && len(ops) > 0 {
		snap, ok, err := snapshots.Snapshot(ctx, k)
		if err != nil {
			return sr, rs, fmt.Errorf("validating %s: %w", k, err)
		}
		if !ok {
			add(IssueSnapshot, int64(len(ops)-1), "the projection holds no snapshot of the stream")
		} else {
			for _, d := range snapshotDiffs(snap, st) {
				add(IssueSnapshot, snap.Index, "%s", d)
			}
		}
	}
	return sr, rs, nil
}

// snapshotDiffs compares a projection's snapshot with the replayed head.
// The stored state is compared by its hash, so key order and number
// spelling do not matter.
func snapshotDiffs(snap Snapshot, st *model.StreamState) []string {
	var out []string
	if snap.Index != st.Revision-1 {
		// Everything else follows from the index; more would be noise.
		return []string{fmt.Sprintf("the snapshot is at index %d, the log's head at %d", snap.Index, st.Revision-1)}
	}
	if snap.Hash != st.Hash {
		out = append(out, fmt.Sprintf("snapshot hash %s differs from the replayed state's %s", snap.Hash, st.Hash))
	}
	switch v, err := model.DecodeJSON(snap.State); {
	case err != nil:
		out = append(out, fmt.Sprintf("snapshot state does not decode: %v", err))
	default:
		if h, _, err := model.Hash(v); err != nil || h != st.Hash {
			out = append(out, fmt.Sprintf("snapshot state hashes to %s, the replayed state to %s", h, st.Hash))
		}
	}
	if snap.DocumentType != "" && snap.DocumentType != st.DocumentType {
		out = append(out, fmt.Sprintf("snapshot document type %s differs from the log's %s", snap.DocumentType, st.DocumentType))
	}
	if st.Stream.Scope == oplog.ScopeDocument {
		if info, ok := model.DocumentInfoOf(st); ok && info.IsDeleted != snap.IsDeleted {
			out = append(out, fmt.Sprintf("snapshot deleted flag %v differs from the log's %v", snap.IsDeleted, info.IsDeleted))
		}
	}
	return out
}

// KeyframeRebuild reports what RebuildKeyframes did to one stream.
type KeyframeRebuild struct {
	Stream  oplog.StreamKey `json:"stream"`
	Deleted int64           `json:"deleted"`
	Written int             `json:"written"`
}

// RebuildKeyframes replays every stream of a document from index 0, deletes
// its keyframes and writes fresh ones every keyframe spacing of revisions,
// the interval scaled by the state's size as the executor spaces them
// (model.KeyframeDue), labelled by their last operation's index. A stream
// that does not replay cleanly is left untouched and reported as an error:
// its keyframes are not the problem.
func RebuildKeyframes(ctx context.Context, store oplog.Store, reg *model.Registry, documentID, branch string, interval int) ([]KeyframeRebuild, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("rebuilding keyframes of %s: interval must be positive, got %d", documentID, interval)
	}
	revs, err := store.Revisions(ctx, documentID, branch)
	if err != nil {
		return nil, fmt.Errorf("rebuilding keyframes of %s: %w", documentID, err)
	}
	if len(revs.Revision) == 0 {
		return nil, fmt.Errorf("rebuilding keyframes of %s on %s: %w", documentID, branch, ErrDocumentNotFound)
	}
	var out []KeyframeRebuild
	for _, scope := range sortedScopes(revs.Revision) {
		k := oplog.StreamKey{DocumentID: documentID, Scope: scope, Branch: branch}
		ops, err := store.ReadStream(ctx, k, 0, 0)
		if err != nil {
			return out, fmt.Errorf("rebuilding keyframes of %s: %w", k, err)
		}
		fresh, err := keyframesOf(reg, k, ops, interval)
		if err != nil {
			return out, fmt.Errorf("rebuilding keyframes of %s: replay failed, keyframes left as they are: %w", k, err)
		}
		deleted, err := store.DeleteKeyframes(ctx, k)
		if err != nil {
			return out, fmt.Errorf("rebuilding keyframes of %s: %w", k, err)
		}
		for _, kf := range fresh {
			if err := store.PutKeyframe(ctx, kf); err != nil {
				return out, fmt.Errorf("rebuilding keyframes of %s: %w", k, err)
			}
		}
		out = append(out, KeyframeRebuild{Stream: k, Deleted: deleted, Written: len(fresh)})
	}
	return out, nil
}

// keyframesOf replays a stream and renders its state wherever the executor
// would have: every keyframe spacing (model.KeyframeDue) of revisions.
// Without skips one pass suffices, and the spacing follows the state after
// each operation. An operation with a skip rewrites history before it, so
// then each keyframe is replayed from index 0, and the spacing follows the
// state of the last keyframe, the last one replayed.
func keyframesOf(reg *model.Registry, k oplog.StreamKey, ops []oplog.Operation, interval int) ([]oplog.Keyframe, error) {
	var fresh []oplog.Keyframe
	skips := false
	for i := range ops {
		skips = skips || ops[i].Skip > 0
	}
	st := model.NewStreamState(k, ops[0].DocumentType)
	for i := range ops {
		if !skips {
			if err := reg.Replay(st, ops[i:i+1]); err != nil {
				return nil, err
			}
		}
		if !model.KeyframeDue(int64(i), int64(i+1), int64(interval), st.Size) {
			continue
		}
		if skips {
			var err error
			if st, err = reg.ReplayStream(k, ops[0].DocumentType, ops[:i+1]); err != nil {
				return nil, err
			}
		}
		kf, err := st.Keyframe()
		if err != nil {
			return nil, err
		}
		fresh = append(fresh, kf)
	}
	if skips { // prove the whole stream even past the last keyframe
		if _, err := reg.ReplayStream(k, ops[0].DocumentType, ops); err != nil {
			return nil, err
		}
	}
	return fresh, nil
}
