package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/doclog/doclog/internal/backoff"
)

// The kinds of a change (Change.Kind, Change.Kinds, ChangesQuery.Kinds).
const (
	KindCreated             = "created"
	KindUpdated             = "updated"
	KindDeleted             = "deleted"
	KindRelationshipAdded   = "relationship.added"
	KindRelationshipRemoved = "relationship.removed"
)

// ChangesQuery selects the events of the change feed. The values of one
// filter are OR-ed, different filters AND-ed; an empty filter selects
// everything.
type ChangesQuery struct {
	DocumentTypes []string
	DocumentIDs   []string
	// Parents keeps the changes of the documents a parent links to with a
	// "child" relationship.
	Parents  []string
	Branches []string
	// Kinds keeps a change when any of its Kinds is one of these.
	Kinds []string
	// Operations includes each job's operations in its change.
	Operations bool
	// FromBeginning starts a feed without a cursor at the beginning of the
	// log rather than at its end (new changes only). Either way the
	// server's first frame is a heartbeat at the start position, which
	// becomes the feed's cursor, so a reconnect resumes where the feed
	// started rather than at a later end.
	FromBeginning bool
	// After resumes after a cursor: a Change's Cursor or a Feed's Cursor
	// saved earlier (opaque; the server refuses anything else with 400).
	// It wins over FromBeginning.
	After string
}

// Change is one committed job of one document, in the log's commit order
// (so a document's changes come in the order of its operations).
type Change struct {
	// Cursor is the change's place in the feed: resuming after it neither
	// skips nor repeats a change.
	Cursor string `json:"cursor"`
	// Kind is the job's primary kind, Kinds[0]: KindCreated if it created
	// the document, else KindDeleted, KindRelationshipAdded,
	// KindRelationshipRemoved, KindUpdated in that order.
	Kind string `json:"kind"`
	// Kinds lists every kind the job has, in that same order (any action
	// but the four with a kind of their own counts as KindUpdated).
	Kinds        []string `json:"kinds"`
	JobID        string   `json:"jobId"`
	DocumentID   string   `json:"documentId"`
	DocumentType string   `json:"documentType"`
	Branch       string   `json:"branch"`
	// Scopes are the ranges of indexes the job wrote, per scope, in scope
	// name order.
	Scopes []ScopeRange `json:"scopes"`
	// TimestampUtcMs is the latest action timestamp of the job's
	// operations on the document.
	TimestampUtcMs int64 `json:"timestampUtcMs"`
	// Operations are the job's operations on the document in log order,
	// with ChangesQuery.Operations.
	Operations []Operation `json:"operations,omitempty"`
}

// ScopeRange is the indexes a job wrote in one scope, both inclusive.
type ScopeRange struct {
	Scope     string `json:"scope"`
	FromIndex int64  `json:"fromIndex"`
	ToIndex   int64  `json:"toIndex"`
}

// Feed follows the read store's change feed (GET /v1/changes). It keeps
// the cursor of the last event it read, heartbeats included (a filtered
// feed's resume point moves on even when nothing matches), and resumes
// after it whenever the connection ends: a disconnect, a 503, an idle
// connection, or the server ending the stream on purpose. A Feed is made by
// Client.Changes; Cursor is safe to call from any goroutine, but iterate
// All from one at a time.
type Feed struct {
	c *Client
	q ChangesQuery

	mu     sync.Mutex
	cursor string
}

// Changes returns a feed of the changes q selects. Nothing connects until
// All is iterated.
func (c *Client) Changes(q ChangesQuery) *Feed {
	return &Feed{c: c, q: q, cursor: q.After}
}

// Cursor returns the cursor of the last event read (a change or a
// heartbeat), or ChangesQuery.After before any. Save it to resume later with
// ChangesQuery.After.
func (f *Feed) Cursor() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cursor
}

func (f *Feed) setCursor(c string) {
	if c == "" {
		return
	}
	f.mu.Lock()
	f.cursor = c
	f.mu.Unlock()
}

// All yields the feed's changes, resuming after the last cursor whenever
// the connection ends. Until a first stream opens, connecting is bounded
// by MaxAttempts like any call, so a wrong URL or a server down at the
// start is reported; from then on the feed resumes until ctx ends, the
// delay between attempts growing (up to MaxDelay) while reconnects bring no
// new cursor. It ends when the loop breaks, when ctx ends (without an
// error: ctx.Err() says why), or with one error yielded last: a refusal
// (an *APIError: 400 for a bad filter or cursor, 401 for a token the
// server does not know, 404 from a server without the feed), an answer
// that is not an event stream, an event that does not decode, or the first
// connection's attempts spent. A new iteration after it ended resumes
// after Cursor.
func (f *Feed) All(ctx context.Context) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		connected := false
		// stale counts the attempts in a row that brought no new cursor.
		stale := 0
		for ctx.Err() == nil {
			before := f.Cursor()
			opened, stop, err := f.connect(ctx, yield)
			if stop || ctx.Err() != nil {
				return
			}
			connected = connected || opened
			var end *endOfStream
			if errors.As(err, &end) && end.reason == "max_age" {
				// The server rotates long connections: nothing is wrong.
				continue
			}
			if !retryable(ctx, err) {
				yield(Change{}, err)
				return
			}
			if f.Cursor() != before {
				stale = 0
			}
			stale++
			if !connected && stale >= f.c.cfg.MaxAttempts {
				yield(Change{}, fmt.Errorf("follow the change feed: %d attempts to connect failed: %w", stale, err))
				return
			}
			if sleep(ctx, f.reconnectDelay(err, stale)) != nil {
				return
			}
		}
	}
}

// endOfStream is the server ending the stream on purpose (event: end).
type endOfStream struct{ reason string }

func (e *endOfStream) Error() string { return "the server ended the change feed (" + e.reason + ")" }

// errIdle ends a connection that sent nothing for FeedIdleTimeout.
var errIdle = errors.New("the change feed sent nothing, not even a heartbeat, within the idle timeout")

func (f *Feed) reconnectDelay(err error, failures int) time.Duration {
	if e := AsAPIError(err); e != nil && e.RetryAfter > 0 {
		return e.RetryAfter
	}
	return backoff.Exponential(f.c.cfg.BaseDelay, f.c.cfg.MaxDelay, failures)
}

func (f *Feed) request() request {
	q := url.Values{}
	add := func(name string, vs []string) {
		for _, v := range vs {
			q.Add(name, v)
		}
	}
	add("documentType", f.q.DocumentTypes)
	add("documentId", f.q.DocumentIDs)
	add("parent", f.q.Parents)
	add("branch", f.q.Branches)
	add("kind", f.q.Kinds)
	if f.q.Operations {
		q.Set("operations", "true")
	}
	h := http.Header{"Accept": {"text/event-stream"}, "Cache-Control": {"no-cache"}}
	if cursor := f.Cursor(); cursor != "" {
		// The header is what the standard's reconnect sends and wins on
		// the server; the parameter says the same to whoever logs URLs.
		h.Set("Last-Event-ID", cursor)
		q.Set("after", cursor)
	} else if f.q.FromBeginning {
		q.Set("from", "beginning")
	}
	return request{api: readstoreRead, method: http.MethodGet, path: "/v1/changes", query: q, header: h}
}

// connect opens one connection and reads it to its end, which err says
// (never nil). opened reports whether the stream opened; stop that the
// loop must end (the consumer broke out, or a final error was yielded).
func (f *Feed) connect(parent context.Context, yield func(Change, error) bool) (opened, stop bool, err error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	resp, err := f.c.send(ctx, f.request())
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, false, &permanentError{fmt.Errorf("follow the change feed: the answer is %q, not an event stream", resp.Header.Get("Content-Type"))}
	}
	// From here on the connection's end is the feed's to resume from.
	var idle *time.Timer
	if d := f.c.cfg.FeedIdleTimeout; d > 0 {
		idle = time.AfterFunc(d, func() { cancel(errIdle) })
		defer idle.Stop()
	}
	r := newSSEReader(resp.Body)
	for {
		ev, err := r.next()
		if idle != nil {
			idle.Reset(f.c.cfg.FeedIdleTimeout)
		}
		if err != nil {
			f.setCursor(r.lastID)
			if cause := context.Cause(ctx); cause == errIdle {
				err = errIdle
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("the change feed's connection ended")
			}
			return true, false, err
		}
		switch ev.event {
		case "heartbeat":
			f.setCursor(r.lastID)
			continue
		case "end":
			var end struct {
				Cursor string `json:"cursor"`
				Reason string `json:"reason"`
			}
			_ = json.Unmarshal([]byte(ev.data), &end)
			f.setCursor(r.lastID)
			return true, false, &endOfStream{reason: end.Reason}
		}
		var ch Change
		if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
			yield(Change{}, fmt.Errorf("follow the change feed: decode the %s event after cursor %q: %w", ev.event, f.Cursor(), err))
			return true, true, nil
		}
		if ch.JobID == "" {
			// Not a change: an event type this client does not know.
			f.setCursor(r.lastID)
			continue
		}
		if r.lastID != "" {
			ch.Cursor = r.lastID
		}
		f.setCursor(ch.Cursor)
		// The consumer's time with the change is not the server's silence.
		if idle != nil {
			idle.Stop()
		}
		if !yield(ch, nil) {
			return true, true, nil
		}
		if idle != nil {
			idle.Reset(f.c.cfg.FeedIdleTimeout)
		}
	}
}
