package indexer

import (
	"context"
	"time"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
)

// Pages over Find and Links for the tests, in the shapes they read best.

// DocumentPage is a page of documents and the cursor of the next ("" when
// there is none).
type DocumentPage struct {
	Documents []Document
	Next      string
}

// FindByType pages the live documents of a type in id order, after cursor.
func (x *Index) FindByType(ctx context.Context, documentType, branch, cursor string, limit int) (DocumentPage, error) {
	limit = pageSize(limit)
	docs, err := x.Find(ctx, FindQuery{Branch: branch, Type: documentType, After: cursor, Limit: limit})
	if err != nil {
		return DocumentPage{}, err
	}
	page := DocumentPage{Documents: docs}
	if len(docs) > limit {
		page.Documents = docs[:limit]
		page.Next = docs[limit-1].ID
	}
	return page, nil
}

// Children pages the targets of the parent's "child" relationships.
func (x *Index) Children(ctx context.Context, parentID, branch, cursor string, limit int) (RelationshipPage, error) {
	return x.Outgoing(ctx, parentID, branch, "child", cursor, limit)
}

// Incoming pages the relationships to target, of relType ("" for every
// type).
func (x *Index) Incoming(ctx context.Context, targetID, branch, relType, cursor string, limit int) (RelationshipPage, error) {
	return x.linkPage(ctx, LinkQuery{DocumentID: targetID, Branch: branch, Direction: DirectionIn, Type: relType}, cursor, limit)
}

// Reached reports whether the index has applied every document-scope
// coordinate of the token (the only scope it serves; other coordinates do
// not bear on its reads). A quarantined stream short of its coordinate is a
// *projectors.QuarantinedError.
func (x *Index) Reached(ctx context.Context, token oplog.ConsistencyToken) (bool, error) {
	return projectors.Reached(ctx, token, Name, x.AppliedIndexes, x.store, func(c oplog.Coordinate) bool { return c.Scope == oplog.ScopeDocument })
}

// Wait polls Reached every interval until the token is reached, a stream is
// quarantined, or ctx ends.
func (x *Index) Wait(ctx context.Context, token oplog.ConsistencyToken, interval time.Duration) error {
	return projectors.Wait(ctx, interval, func(ctx context.Context) (bool, error) { return x.Reached(ctx, token) })
}
