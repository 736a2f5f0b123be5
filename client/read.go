package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ReadOption adjusts one read of the read store.
type ReadOption func(*readOptions)

type readOptions struct {
	token  string
	wait   time.Duration
	waitOK bool
	branch string
	scopes []string
}

// WithConsistencyToken makes the read wait until the projection serving it
// has applied the token: the ConsistencyToken of a job's WRITE_READY
// status, passed as it is. The wait is the server's default (5s) unless
// WithWait says otherwise; a token not reached in time is an error
// IsConsistencyTimeout reports. An empty token reads at once, as without
// the option.
func WithConsistencyToken(token string) ReadOption {
	return func(o *readOptions) { o.token = token }
}

// WithWait bounds the wait for the consistency token (the server caps it,
// at 30s by default; 0 checks once without waiting).
func WithWait(d time.Duration) ReadOption {
	return func(o *readOptions) { o.wait, o.waitOK = d, true }
}

// WithBranch reads the branch given rather than main.
func WithBranch(branch string) ReadOption {
	return func(o *readOptions) { o.branch = branch }
}

// WithScopes limits the scopes GetDocument returns (default all). The
// other reads name their one scope in their query and refuse this option.
func WithScopes(scopes ...string) ReadOption {
	return func(o *readOptions) { o.scopes = scopes }
}

var errScopesOption = &permanentError{errors.New("WithScopes applies to GetDocument only; name the scope in the query")}

// read sends a GET to the read store with the options applied.
func (c *Client) read(ctx context.Context, path string, q url.Values, opts []ReadOption, scopesAllowed bool, out any) error {
	var o readOptions
	for _, opt := range opts {
		opt(&o)
	}
	if q == nil {
		q = url.Values{}
	}
	if len(o.scopes) > 0 {
		if !scopesAllowed {
			return errScopesOption
		}
		q.Set("scope", strings.Join(o.scopes, ","))
	}
	if o.branch != "" {
		q.Set("branch", o.branch)
	}
	if o.waitOK {
		q.Set("wait", formatWait(o.wait))
	}
	r := request{api: readstoreRead, method: http.MethodGet, path: path, query: q}
	if o.token != "" {
		// The header keeps the token out of URLs that proxies log.
		r.header = http.Header{"X-Consistency-Token": {o.token}}
	}
	return c.do(ctx, r, out)
}

// formatWait writes d in milliseconds, a form both APIs' wait parameter
// takes (time.Duration.String may write "µs", which they refuse).
func formatWait(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatInt(int64(ms), 10) + "ms"
}

func setInt(q url.Values, name string, v int64) {
	if v > 0 {
		q.Set(name, strconv.FormatInt(v, 10))
	}
}

// GetDocument returns a document by id or slug from the document view:
// its header and the state of each scope. A document the view does not
// hold is an error IsNotFound reports; a deleted one has IsDeleted set.
func (c *Client) GetDocument(ctx context.Context, idOrSlug string, opts ...ReadOption) (*Document, error) {
	var d Document
	if err := c.read(ctx, idPath("/v1/documents/", idOrSlug, ""), nil, opts, true, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// FindDocuments returns a page of documents by type and/or parent from the
// relationship index, ordered by id. Pass the page's NextCursor in the next
// query's Cursor while it is not empty.
func (c *Client) FindDocuments(ctx context.Context, q FindQuery, opts ...ReadOption) (*DocumentPage, error) {
	v := url.Values{}
	if q.Type != "" {
		v.Set("type", q.Type)
	}
	if q.Parent != "" {
		v.Set("parent", q.Parent)
	}
	if q.IncludeDeleted {
		v.Set("includeDeleted", "true")
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	setInt(v, "limit", int64(q.Limit))
	var p DocumentPage
	if err := c.read(ctx, "/v1/documents", v, opts, false, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Relationships returns a page of a document's links from the relationship
// index, ordered by source, type and target.
func (c *Client) Relationships(ctx context.Context, documentID string, q RelationshipQuery, opts ...ReadOption) (*RelationshipPage, error) {
	v := url.Values{}
	if q.Direction != "" {
		v.Set("direction", string(q.Direction))
	}
	if q.Type != "" {
		v.Set("type", q.Type)
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	setInt(v, "limit", int64(q.Limit))
	var p RelationshipPage
	if err := c.read(ctx, idPath("/v1/documents/", documentID, "/relationships"), v, opts, false, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Operations returns a page of one stream's operations from the log,
// from index q.Since on. Pass the page's NextSince in the next query while
// it is not nil.
func (c *Client) Operations(ctx context.Context, documentID string, q OperationQuery, opts ...ReadOption) (*OperationPage, error) {
	v := url.Values{}
	if q.Scope != "" {
		v.Set("scope", q.Scope)
	}
	setInt(v, "since", q.Since)
	setInt(v, "limit", int64(q.Limit))
	var p OperationPage
	if err := c.read(ctx, idPath("/v1/documents/", documentID, "/operations"), v, opts, false, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// State returns a scope's state at a revision, rebuilt by the read store
// from the log (each operation's hash checked).
func (c *Client) State(ctx context.Context, documentID string, q StateQuery, opts ...ReadOption) (*StateAt, error) {
	v := url.Values{}
	if q.Scope != "" {
		v.Set("scope", q.Scope)
	}
	setInt(v, "revision", q.Revision)
	var s StateAt
	if err := c.read(ctx, idPath("/v1/documents/", documentID, "/state"), v, opts, false, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// decodeState decodes a JSON state into v.
func decodeState(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return errors.New("no state to decode")
	}
	return json.Unmarshal(raw, v)
}
