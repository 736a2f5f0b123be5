package readstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	oplog "github.com/doclog/doclog/log"
)

// Source names what serves a read: a projection, or the log itself. A
// consistency token is waited for on the source of the read it comes with.
type Source string

const (
	// SourceDocView is the document view (projectors/docview): documents
	// by id or slug. It follows every scope.
	SourceDocView Source = "docview"
	// SourceIndexer is the relationship index (projectors/indexer): find
	// by type and parent, relationships. It follows the document scope
	// only, so coordinates of other scopes are not waited for.
	SourceIndexer Source = "indexer"
	// SourceLog is the operation log: operations and state at a revision.
	SourceLog Source = "log"
)

// Follows reports whether the source keeps streams of scope, that is
// whether a token coordinate of that scope is waited for on it.
func (s Source) Follows(scope string) bool {
	return s != SourceIndexer || scope == oplog.ScopeDocument
}

// Document is a document as the document view holds it.
type Document struct {
	ID                string
	Branch            string
	DocumentType      string
	Name              string
	Slug              string
	Version           int
	CreatedAtUtcMs    int64
	LastModifiedUtcMs int64
	IsDeleted         bool
	DeletedAtUtcMs    int64
	// Scopes holds each scope the view has applied.
	Scopes map[string]ScopeState
}

// ScopeState is one scope of a document: its state after the operation at
// LastIndex, and that operation's hash.
type ScopeState struct {
	State     json.RawMessage
	LastIndex int64
	Hash      string
	Version   int
}

// IndexedDocument is a document as the relationship index holds it.
// DocumentType is empty for a child the index has not seen created yet.
type IndexedDocument struct {
	ID             string
	DocumentType   string
	CreatedAtUtcMs int64
	IsDeleted      bool
	DeletedAtUtcMs int64
	// LastIndex is the index of the document scope's last applied
	// operation, -1 when the index has not seen the document.
	LastIndex int64
}

// FindQuery selects documents of the relationship index. Results are in
// code-point order of their id, after After.
type FindQuery struct {
	Branch string
	// Type keeps documents of this type; "" keeps every type.
	Type string
	// Parent keeps the children of this document (its "child"
	// relationships); "" keeps every document.
	Parent string
	// IncludeDeleted keeps deleted documents too.
	IncludeDeleted bool
	// After is the id of the previous page's last document ("" for the
	// first page).
	After string
	// Limit bounds the page; the store returns up to Limit+1 rows so the
	// caller knows whether there is a next page.
	Limit int
}

// Direction selects relationships by the side the document is on.
type Direction string

const (
	DirectionOut  Direction = "out"  // the document is the source
	DirectionIn   Direction = "in"   // the document is the target
	DirectionBoth Direction = "both" // either
)

// RelationshipQuery selects the links of one document of the relationship
// index, ordered by (source, type, target), after After.
type RelationshipQuery struct {
	DocumentID string
	Branch     string
	Direction  Direction
	// Type keeps links of this type; "" keeps every type.
	Type string
	// After is the key of the previous page's last link (nil for the first
	// page); only SourceID, Type and TargetID are used.
	After *Relationship
	// Limit bounds the page; the store returns up to Limit+1 rows so the
	// caller knows whether there is a next page.
	Limit int
}

// Relationship is one link of the relationship index.
type Relationship struct {
	SourceID string
	Type     string
	TargetID string
	Metadata json.RawMessage
	// SinceIndex is the index, in the source's document scope, of the
	// operation that added the link.
	SinceIndex int64
}

// Quarantine is a stream a projection stopped applying.
type Quarantine struct {
	Index     int64
	ErrorName string
	Reason    string
}

// StreamProgress is how far a source has applied one stream.
type StreamProgress struct {
	// Applied is the index of the last applied operation, -1 for none.
	Applied int64
	// Quarantine is set when the projection has quarantined the stream.
	Quarantine *Quarantine
}

// ErrUnavailable is wrapped by a Store's error when its database cannot be
// reached or the connection broke: nothing is wrong with the request, and the
// API answers 503 so the client retries. (The log reports the same with
// *oplog.Unavailable.)
var ErrUnavailable = errors.New("the read store's database is unavailable")

// Store is the projections' query side. Methods return *NotFoundError for
// a document the projection does not hold, and an error wrapping
// ErrUnavailable when the database does not answer.
type Store interface {
	// Document returns a document of the document view by id.
	Document(ctx context.Context, id, branch string) (*Document, error)
	// DocumentBySlug returns the document of the document view holding
	// slug.
	DocumentBySlug(ctx context.Context, slug, branch string) (*Document, error)
	// FindDocuments pages documents of the relationship index.
	FindDocuments(ctx context.Context, q FindQuery) ([]IndexedDocument, error)
	// IndexedDocument returns a document of the relationship index.
	IndexedDocument(ctx context.Context, id, branch string) (IndexedDocument, error)
	// Relationships pages a document's links in the relationship index,
	// ordered by source, type and target.
	Relationships(ctx context.Context, q RelationshipQuery) ([]Relationship, error)
	// Progress returns how far the projection (SourceDocView or
	// SourceIndexer) has applied each stream, with its quarantine, in one
	// round trip. Every stream asked for has an entry.
	Progress(ctx context.Context, source Source, streams []oplog.StreamKey) (map[oplog.StreamKey]StreamProgress, error)
	// Ping checks that the database answers, for /readyz.
	Ping(ctx context.Context) error
}

// ProgressNotifier is implemented by a Store that can say when a projection
// has moved (a Postgres notification, for pgread). The handler then looks
// up the streams waited for on that source at once rather than at its next
// poll: the poll interval stays the bound when a notification is missed, and
// the notifications only take the wait of a token read down from about half
// an interval to a round trip.
type ProgressNotifier interface {
	// WatchProgress calls progressed each time source has moved, and
	// failed with the reason whenever it cannot watch for a while, until
	// ctx ends. It blocks until then.
	WatchProgress(ctx context.Context, progressed func(source Source), failed func(error))
}

// Log is the part of the operation log the read store uses (the change
// feed pages the tail and polls its end); *log/postgres.Store satisfies it.
type Log interface {
	ReadStream(ctx context.Context, stream oplog.StreamKey, fromIndex int64, limit int) ([]oplog.Operation, error)
	Revisions(ctx context.Context, documentID, branch string) (oplog.Revisions, error)
	NearestKeyframe(ctx context.Context, stream oplog.StreamKey, atOrBelow int64) (oplog.Keyframe, bool, error)
	Heads(ctx context.Context, documentIDs []string) (map[oplog.StreamKey]int64, error)
	Tail(ctx context.Context, after oplog.Cursor, limit int) (oplog.TailPage, error)
	TailEnd(ctx context.Context) (oplog.TailEnd, error)
	CursorBefore(txid uint64) oplog.Cursor
}

// NotFoundError reports a document (or slug) a source does not hold.
type NotFoundError struct {
	Source     Source
	DocumentID string
	Slug       string
	Branch     string
}

func (e *NotFoundError) Error() string {
	if e.Slug != "" {
		return fmt.Sprintf("%s: no document holds slug %q on branch %s", e.Source, e.Slug, e.Branch)
	}
	return fmt.Sprintf("%s: document %s not found on branch %s", e.Source, e.DocumentID, e.Branch)
}
