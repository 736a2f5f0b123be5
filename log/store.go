package log

import "context"

// Store is the operation log. Implementations must pass the conformance suite
// in log/logtest.
type Store interface {
	// Append writes a batch of requests, one per document, in one
	// transaction. Each request is all or nothing and reports its own
	// outcome in the AppendResult at the same position; one request's
	// failure never keeps the others from committing. The returned error is
	// for the batch as a whole (the database is unreachable, the context
	// ended): then nothing was written.
	//
	// A request whose operations are already stored at their indexes with
	// the same opId and skip, or whose jobs already have results, is a
	// replay: the stored rows and results are returned with Replayed set and
	// nothing is written. The replay check precedes the read-set check.
	Append(ctx context.Context, reqs []AppendRequest) ([]AppendResult, error)

	// ReadStream returns up to limit operations of a stream with index >=
	// fromIndex, in index order. limit <= 0 means no limit.
	ReadStream(ctx context.Context, stream StreamKey, fromIndex int64, limit int) ([]Operation, error)

	// Tail pages the global log in commit-safe order: a row is returned only
	// once no transaction that could still insert a row before it is open,
	// so paging by the returned cursor never skips a row.
	Tail(ctx context.Context, after Cursor, limit int) (TailPage, error)

	// TailEnd reports where the commit-safe tail ends now: the horizon
	// (every transaction below it has ended, and Tail has nothing of them
	// still to come; rows of the horizon's transaction and later ones are
	// all still to come) and the transaction id of the last row below it
	// (0 for an empty log). Both come from one snapshot, so a reader that
	// has every row up to Last may treat everything below Horizon as read.
	TailEnd(ctx context.Context) (TailEnd, error)

	// CursorBefore returns the cursor from which Tail continues with the
	// rows of transaction txid, if it has any, then with every later one:
	// a position between transactions, for readers that count their
	// progress in transactions (the read store's change feed).
	CursorBefore(txid uint64) Cursor

	// Revisions returns the revision of each scope of a document on a branch.
	Revisions(ctx context.Context, documentID, branch string) (Revisions, error)

	// Heads returns the revision of every non-empty stream (each scope on
	// each branch) of the given documents, in one call: what a reconciler
	// compares a projection with. A document without operations has no
	// entry.
	Heads(ctx context.Context, documentIDs []string) (map[StreamKey]int64, error)

	// StreamLatestTimestamp returns the largest operation timestamp in a
	// stream (a true maximum, not the last row's) and false when it is empty.
	StreamLatestTimestamp(ctx context.Context, stream StreamKey) (int64, bool, error)

	// ListDocuments pages document ids in code-point order, starting after
	// cursor, which may be any string.
	ListDocuments(ctx context.Context, after string, limit int) (DocumentPage, error)

	// JobResults returns the stored results of the jobs that have one.
	JobResults(ctx context.Context, jobIDs []string) (map[string]JobResult, error)

	// PutKeyframe stores (or replaces) the keyframe of a stream at an index.
	PutKeyframe(ctx context.Context, kf Keyframe) error
	// NearestKeyframe returns the keyframe with the largest index <= atOrBelow.
	NearestKeyframe(ctx context.Context, stream StreamKey, atOrBelow int64) (Keyframe, bool, error)
	// ListKeyframes returns a stream's keyframes in index order.
	ListKeyframes(ctx context.Context, stream StreamKey) ([]Keyframe, error)
	// DeleteKeyframes removes a stream's keyframes and reports how many.
	DeleteKeyframes(ctx context.Context, stream StreamKey) (int64, error)
}

// BranchRegistry is the branch registry a backend keeps beside the log.
// Entries are written only through AppendRequest.Branch, so a registry
// change commits with the job that made it.
type BranchRegistry interface {
	// Branch returns a document branch's registry entry and whether it
	// has one.
	Branch(ctx context.Context, documentID, branch string) (BranchRef, bool, error)
	// Branches lists a document's branches in code-point order: every
	// branch with operations or an entry, deleted ones included (Deleted
	// set), each with its tips.
	Branches(ctx context.Context, documentID string) ([]BranchInfo, error)
}
