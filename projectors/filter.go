package projectors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"

	oplog "github.com/doclog/doclog/log"
)

// Filter is what a projector follows: the streams whose document type,
// scope and branch are each among the listed ones, an empty list keeping
// every value. The zero Filter follows everything. The runner asks it
// before anything else is done with a stream: a stream it does not follow
// gets no stream head, no verification and no call of Apply, in the batch,
// the reconciler, a lift and a rebuild alike, so what it costs is the
// decoding of its records.
type Filter struct {
	// DocumentTypes are the document types followed (doclog/ledger, ...).
	DocumentTypes []string
	// Scopes are the scopes followed (oplog.ScopeDocument, ScopeGlobal,
	// ScopeLocal).
	Scopes []string
	// Branches are the branches followed (oplog.DefaultBranch, ...).
	Branches []string
}

// Follows reports whether the filter keeps the stream of a document of
// the type.
func (f Filter) Follows(documentType string, stream oplog.StreamKey) bool {
	return f.FollowsStream(stream) && f.FollowsType(documentType)
}

// FollowsStream reports whether the filter keeps the stream's scope and
// branch, whatever its document type.
func (f Filter) FollowsStream(stream oplog.StreamKey) bool {
	return keeps(f.Scopes, stream.Scope) && keeps(f.Branches, stream.Branch)
}

// FollowsType reports whether the filter keeps documents of the type.
func (f Filter) FollowsType(documentType string) bool { return keeps(f.DocumentTypes, documentType) }

// ByType reports whether the filter selects by document type, which a
// stream's key does not carry.
func (f Filter) ByType() bool { return len(f.DocumentTypes) > 0 }

func keeps(values []string, v string) bool { return len(values) == 0 || slices.Contains(values, v) }

// Validate refuses an empty value in a list: it would match no stream and
// most likely stands for a setting that was not given.
func (f Filter) Validate() error {
	for _, l := range []struct {
		what   string
		values []string
	}{{"document type", f.DocumentTypes}, {"scope", f.Scopes}, {"branch", f.Branches}} {
		if slices.Contains(l.values, "") {
			return fmt.Errorf("a projector filter's %s must not be empty (an empty list follows every %s)", l.what, l.what)
		}
	}
	return nil
}

// String is the filter as logs and errors show it.
func (f Filter) String() string {
	part := func(name string, values []string) string {
		if len(values) == 0 {
			return name + "=*"
		}
		return name + "=" + strings.Join(values, ",")
	}
	return part("types", f.DocumentTypes) + " " + part("scopes", f.Scopes) + " " + part("branches", f.Branches)
}

// documentTypeCacheSize bounds the document types a runner remembers
// (about a hundred bytes each).
const documentTypeCacheSize = 1 << 16

// documentTypes remembers the type of the documents a runner saw that its
// filter does not follow, so that a reconciler comparing stream heads
// (which carry no type) with the projection of a filter by type reads a
// document's type from the log once, not on every pass. Write-ready
// records fill it for free. A document of a followed type needs no entry
// once its streams are held, so the records' ones are not kept: the bound
// goes to the documents only this cache can tell apart. A document's type
// never changes, so an entry is never stale; an evicted one costs one more
// read. A nil *documentTypes knows nothing and looks nothing up: the
// filter does not select by type.
type documentTypes struct {
	lru    *lru.Cache[string, string]
	log    oplog.Store
	filter Filter
	// reads counts the types read from the log.
	reads atomic.Int64
}

func newDocumentTypes(f Filter, log oplog.Store) *documentTypes {
	if !f.ByType() {
		return nil
	}
	c, err := lru.New[string, string](documentTypeCacheSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &documentTypes{lru: c, log: log, filter: f}
}

// saw records the type of a document a record named, when not followed.
func (d *documentTypes) saw(documentID, documentType string) {
	if d == nil || documentType == "" || d.filter.FollowsType(documentType) {
		return
	}
	d.lru.Add(documentID, documentType)
}

// of returns the type of the document of stream, reading its first
// operation when the type is not known; "" when the stream has none.
func (d *documentTypes) of(ctx context.Context, stream oplog.StreamKey) (string, error) {
	if d == nil {
		return "", errors.New("document types asked of a filter that does not select by type")
	}
	if t, ok := d.lru.Get(stream.DocumentID); ok {
		return t, nil
	}
	d.reads.Add(1)
	ops, err := d.log.ReadStream(ctx, stream, 0, 1)
	if err != nil {
		return "", fmt.Errorf("read the document type of %s: %w", stream.DocumentID, err)
	}
	if len(ops) == 0 {
		return "", nil
	}
	d.lru.Add(stream.DocumentID, ops[0].DocumentType)
	return ops[0].DocumentType, nil
}
