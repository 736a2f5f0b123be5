package readstore_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/readstore/feed"
)

// caughtUp reads a stream until a heartbeat shows it scanned past
// transaction tx, and returns the events before it: all the stream has up
// to there, nothing left pending.
func (s *subscription) caughtUp(tx uint64) []feedEvent {
	s.t.Helper()
	var out []feedEvent
	for {
		f, ok := s.next()
		require.True(s.t, ok, "the stream ended after %d events", len(out))
		switch f.event {
		case "heartbeat":
			pos, err := feed.ParsePosition(f.id)
			require.NoError(s.t, err)
			require.Equal(s.t, `{"cursor":"`+f.id+`"}`, f.data)
			if pos.Tx > tx {
				return out
			}
		case "end":
			s.t.Fatalf("the stream ended: %s", f.data)
		default:
			out = append(out, f.decode(s.t))
		}
	}
}

// lastTx is the transaction of the last row.
func lastTx(rows []oplog.Operation) uint64 { return rows[len(rows)-1].TxID }

func keys(events []feedEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = eventKey(e)
	}
	return out
}

// Events are one per job per document of a transaction, their rows
// grouped although a transaction inserts per stream, each document's in
// the order its jobs were applied; kinds and scopes say what the job did,
// and resuming from any event's id continues with the next event.
func TestFeedEvents(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	w := newLogWriter(t, env)
	fs := startFeed(t, env, readstore.Config{FeedHeartbeat: 200 * time.Millisecond}, nil)
	live := fs.subscribe("") // from=now: only what commits from here

	created := w.commit(w.create("a", jsondoc.DocumentType, ""), w.create("b", jsondoc.DocumentType, ""), w.create("c", drive.DocumentType, ""))
	// Built in submission order, so the actions' timestamps are too.
	first := w.patch("a", oplog.ScopeGlobal, 0)
	renameB := w.rename("b")
	addAndName := job{doc: "a", actions: append(w.link("a", "b", "", true).actions, w.rename("a").actions...)}
	twoScopes := job{doc: "a", actions: append(w.patch("a", oplog.ScopeGlobal, 1).actions, w.patch("a", oplog.ScopeLocal, 2).actions...)}
	mixed := w.commit(
		first, renameB, addAndName, twoScopes, w.remove("c"),
		w.link("a", "b", "", false), w.patch("b", oplog.ScopeGlobal, 3), w.patch("a", oplog.ScopeLocal, 4),
	)
	require.Equal(t, created[0].TxID, created[len(created)-1].TxID)
	require.Equal(t, mixed[0].TxID, mixed[len(mixed)-1].TxID, "one transaction")

	all := fs.subscribe("from=beginning&operations=true").events(11)
	require.Equal(t, keys(all), keys(live.events(11)), "from=now sees what commits after it, the same events")

	type want struct {
		doc, kind string
		kinds     []string
		scopes    string
	}
	wants := []want{
		{"a", "created", []string{"created"}, "document 0-0"},
		{"b", "created", []string{"created"}, "document 0-0"},
		{"c", "created", []string{"created"}, "document 0-0"},
		// a's jobs, then b's, then c's: documents in the order of their
		// first row.
		// a's jobs as they were submitted: index order on every scope two
		// share, action timestamps between the others, although the
		// document scope's rows are inserted first.
		{"a", "updated", []string{"updated"}, "global 0-0"},
		{"a", "relationship.added", []string{"relationship.added", "updated"}, "document 1-2"},
		{"a", "updated", []string{"updated"}, "global 1-1 local 0-0"},
		{"a", "relationship.removed", []string{"relationship.removed"}, "document 3-3"},
		{"a", "updated", []string{"updated"}, "local 1-1"},
		{"b", "updated", []string{"updated"}, "document 1-1"},
		{"b", "updated", []string{"updated"}, "global 0-0"},
		{"c", "deleted", []string{"deleted"}, "document 1-1"},
	}
	rows := 0
	for i, e := range all {
		var scopes []string
		for _, s := range e.Scopes {
			scopes = append(scopes, fmt.Sprintf("%s %d-%d", s.Scope, s.FromIndex, s.ToIndex))
		}
		got := want{e.DocumentID, e.Kind, e.Kinds, strings.Join(scopes, " ")}
		require.Equal(t, wants[i], got, "event %d", i)
		require.Equal(t, oplog.DefaultBranch, e.Branch)
		require.NotEmpty(t, e.Operations)
		for _, op := range e.Operations {
			require.Equal(t, e.JobID, op.JobID, "an event holds its own job's rows")
			require.Equal(t, e.DocumentID, op.DocumentID)
			require.Equal(t, e.DocumentType, op.DocumentType)
			require.LessOrEqual(t, op.TimestampUtcMs, e.TimestampUtcMs)
		}
		rows += len(e.Operations)
	}
	require.Equal(t, len(created)+len(mixed), rows, "every row is in one event")
	require.Equal(t, drive.DocumentType, all[2].DocumentType)

	without := fs.subscribe("from=beginning").events(1)[0]
	require.Empty(t, without.Operations, "operations only with operations=true")

	// Pages of three rows: each transaction spans pages, and the stream
	// holds it whole before its events, the same ones.
	small := startFeed(t, env, readstore.Config{FeedPageSize: 3}, nil)
	require.Equal(t, keys(all), keys(small.subscribe("from=beginning").events(len(all))))
	require.Equal(t, keys(all[5:]), keys(small.subscribe("after="+all[4].Cursor).events(len(all)-5)), "resumed inside a transaction larger than a page")

	// A marker after the last event: a resumed stream reads exactly the
	// events after its cursor, then the marker, so nothing was repeated or
	// skipped in between.
	marker := w.commit(w.patch("b", oplog.ScopeGlobal, 5))
	for i, e := range all {
		var s *subscription
		if i%2 == 0 {
			s = fs.subscribe("after=" + e.Cursor)
		} else {
			s = fs.subscribe("from=beginning&after=0-0", "Last-Event-ID", e.Cursor)
		}
		rest := s.events(len(all) - i)
		require.Equal(t, keys(all[i+1:]), keys(rest[:len(rest)-1]), "resuming after event %d (%s)", i, e.Cursor)
		require.Equal(t, marker[0].JobID, rest[len(rest)-1].JobID)
		s.close()
	}
}

// Every filter keeps exactly its events; parent follows the log's child
// links at each event's place, also for a stream resumed in the middle.
func TestFeedFilters(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	w := newLogWriter(t, env)
	fs := startFeed(t, env, readstore.Config{FeedHeartbeat: 100 * time.Millisecond}, nil)

	w.commit(w.create("p", jsondoc.DocumentType, ""), w.create("c1", jsondoc.DocumentType, ""),
		w.create("c2", jsondoc.DocumentType, ""), w.create("d", jsondoc.DocumentType, "dev"), w.create("v", drive.DocumentType, ""))
	w.commit(w.patch("c1", oplog.ScopeGlobal, 1))                                                   // before the link
	w.commit(w.link("p", "c1", model.RelationshipChild, true), w.patch("c1", oplog.ScopeGlobal, 2), // linked first: kept
		w.link("p", "c2", "ref", true), w.link("p", "d", "", true), w.patch("d", oplog.ScopeGlobal, 3)) // not a child / another branch
	w.commit(w.patch("c1", oplog.ScopeGlobal, 4), w.patch("c2", oplog.ScopeGlobal, 5), w.rename("p"))
	w.commit(w.link("p", "c1", "", false), w.patch("c1", oplog.ScopeGlobal, 6)) // unlinked first: dropped
	end := w.commit(w.link("p", "c2", "", true), w.patch("c2", oplog.ScopeGlobal, 7), w.remove("c1"))
	last := lastTx(end)

	all := fs.subscribe("from=beginning&operations=true").caughtUp(last)
	require.Len(t, all, 19)
	filtered := func(keep func(e feedEvent) bool) []string {
		var out []string
		for _, e := range all {
			if keep(e) {
				out = append(out, eventKey(e))
			}
		}
		return out
	}
	byParent := func(e feedEvent) bool {
		// c1's patches 2 and 4 (after the link, before the unlink) and
		// c2's 7 (after its child link); never c1's 1 or 6, c2's 5 (a ref
		// link) or d's 3 (a link of main's p, d on dev).
		var n float64 = -1
		for _, op := range e.Operations {
			if op.Action.Type == jsondoc.ActionMergePatch {
				require.NoError(t, jsonUnmarshal(op.Action.Input, &struct{ N *float64 }{&n}))
			}
		}
		return (e.DocumentID == "c1" && (n == 2 || n == 4)) || (e.DocumentID == "c2" && n == 7)
	}
	cases := []struct {
		query string
		keep  func(e feedEvent) bool
	}{
		{"documentType=doclog/drive", func(e feedEvent) bool { return e.DocumentType == drive.DocumentType }},
		{"documentId=c1&documentId=d", func(e feedEvent) bool { return e.DocumentID == "c1" || e.DocumentID == "d" }},
		{"branch=dev", func(e feedEvent) bool { return e.Branch == "dev" }},
		{"branch=main&branch=dev", func(e feedEvent) bool { return true }},
		{"kind=relationship.added", func(e feedEvent) bool { return slices.Contains(e.Kinds, "relationship.added") }},
		{"kind=created&kind=deleted", func(e feedEvent) bool { return e.Kind == "created" || e.Kind == "deleted" }},
		{"kind=updated", func(e feedEvent) bool { return slices.Contains(e.Kinds, "updated") }},
		{"documentType=doclog/json&kind=updated&branch=main", func(e feedEvent) bool {
			return e.DocumentType == jsondoc.DocumentType && e.Branch == "main" && slices.Contains(e.Kinds, "updated")
		}},
		{"parent=p", byParent},
		{"parent=p&parent=nobody", byParent},
		{"parent=p&documentId=c2", func(e feedEvent) bool { return byParent(e) && e.DocumentID == "c2" }},
		{"parent=c1", func(e feedEvent) bool { return false }},
	}
	for _, tc := range cases {
		want := filtered(tc.keep)
		got := keys(fs.subscribe("from=beginning&" + tc.query).caughtUp(last))
		require.Equal(t, want, nilIfEmpty(got), tc.query)
	}
	parentKeys := filtered(byParent)
	require.Len(t, parentKeys, 3)

	// Resumed after each event of the whole feed, the parent filter keeps
	// exactly the rest of its events: the links are replayed from the log
	// up to the cursor, those inside its transaction included.
	for i, e := range all {
		got := keys(fs.subscribe("parent=p&after=" + e.Cursor).caughtUp(last))
		later := map[string]bool{}
		for _, x := range all[i+1:] {
			later[x.Cursor] = true
		}
		want := filtered(func(x feedEvent) bool { return byParent(x) && later[x.Cursor] })
		require.Equal(t, want, nilIfEmpty(got), "parent=p after event %d", i)
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Every bad parameter is a 400 naming it, before any event; no token is a
// 401; over the stream limit a 503 with Retry-After; each answer is one the
// OpenAPI document allows.
func TestFeedRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, readstore.Config{})
	long := strings.Repeat("x", model.MaxIDLength+1)
	many := strings.Repeat("documentId=a&", readstore.DefaultFeedMaxFilterValues+1)
	for _, tc := range []struct {
		query, header, field, message string
	}{
		{"kind=renamed", "", "kind", `"renamed" is not a kind (one of: created, deleted, relationship.added, relationship.removed, updated)`},
		{"after=12.3", "", "after", "is not a change feed position"},
		{"after=12-", "", "after", "is not a change feed position"},
		{"after=-1-2", "", "after", "is not a change feed position"},
		{"after=99999999999999999999-1", "", "after", "is not a change feed position"},
		{"after=1-2&after=1-3", "", "after", "given 2 times; give it once"},
		{"operations=maybe", "", "operations", `"maybe" is not a boolean; give true or false`},
		{"from=later", "", "from", `"later" is not a start; give now or beginning`},
		{"from=now&from=now", "", "from", "given 2 times"},
		{"limit=3", "", "limit", "unknown query parameter (known: after, branch, documentId, documentType, from, kind, operations, parent)"},
		{"documentId=", "", "documentId", "must not be empty"},
		{"parent=" + long, "", "parent", "characters, more than the"},
		{"branch=", "", "branch", "must not be empty"},
		{"documentType=", "", "documentType", "must not be empty"},
		{many, "", "documentId", "given 101 times; at most 100 values are accepted"},
		{"", "garbage", "Last-Event-ID", "is not a change feed position"},
		{"", " ", "Last-Event-ID", "is not a change feed position"},
	} {
		var header []string
		if tc.header != "" {
			header = []string{"Last-Event-ID", tc.header}
		}
		res := get(t, b.h, readstore.ChangesPath+"?"+tc.query, header...)
		require.Equal(t, http.StatusBadRequest, res.status, "%s: %s", tc.query, res.body)
		e := res.apiError(t)
		require.Equal(t, readstore.CodeInvalidParameter, e.Error.Code)
		require.Equal(t, tc.field, e.Error.Field, tc.query)
		require.True(t, strings.HasPrefix(e.Error.Message, tc.field+": "), "%s: %s", tc.query, e.Error.Message)
		require.Contains(t, e.Error.Message, tc.message, tc.query)
	}
	res, _ := serve(b.h, readstore.ChangesPath, "Last-Event-ID", "1-1", "Last-Event-ID", "1-2")
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Equal(t, "Last-Event-ID", res.apiError(t).Error.Field)

	authed := setup(t, readstore.Config{ReadTokens: []string{"feed-read-token-0123456789abcdef01"}})
	res = get(t, authed.h, readstore.ChangesPath)
	require.Equal(t, http.StatusUnauthorized, res.status)

	fs := startFeed(t, b.env, readstore.Config{FeedMaxStreams: 1}, nil)
	first := fs.subscribe("")
	over, hres := fs.open("")
	require.Equal(t, http.StatusServiceUnavailable, hres.StatusCode)
	require.Equal(t, "1", hres.Header.Get("Retry-After"))
	body := readAll(t, hres)
	require.Contains(t, body, `"code":"unavailable"`)
	require.Contains(t, body, "maximum of 1 change streams")
	over.close()
	first.close()
	// The slot is freed once the first stream's handler returns.
	require.Eventually(t, func() bool {
		s, res := fs.open("")
		defer s.close()
		return res.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "a stream is accepted again once the first one closed")
}

// A stream that sends nothing sends heartbeats carrying the scanned
// position, which a filtered stream moves on with and from which a resumed
// stream repeats nothing; a stream ends with event: end at its maximum age
// and on shutdown, and Stop does not wait for streams.
func TestFeedHeartbeatsAndEnds(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	w := newLogWriter(t, env)
	fs := startFeed(t, env, readstore.Config{FeedHeartbeat: 100 * time.Millisecond, FeedMaxAge: 3 * time.Second}, nil)

	quiet := fs.subscribe("documentId=nothing")
	rows := w.commit(w.create("h", jsondoc.DocumentType, ""))
	rows = append(rows, w.commit(w.patch("h", oplog.ScopeGlobal, 1))...)
	require.Empty(t, quiet.caughtUp(lastTx(rows)), "a filter that keeps nothing sends only heartbeats")
	f, ok := quiet.next()
	require.True(t, ok)
	require.Equal(t, "heartbeat", f.event)
	resumed := fs.subscribe("after=" + f.id)
	next := w.commit(w.patch("h", oplog.ScopeGlobal, 2))
	got := resumed.events(1)
	require.Equal(t, next[0].JobID, got[0].JobID, "resuming from a heartbeat repeats nothing scanned before it")

	// The maximum age ends every stream with its position.
	for {
		f, ok := quiet.next()
		require.True(t, ok, "the stream closed without an end event")
		if f.event == "end" {
			require.Regexp(t, `^\{"cursor":"[0-9]+-[0-9]+","reason":"max_age"\}$`, f.data)
			break
		}
		require.Equal(t, "heartbeat", f.event)
	}
	_, ok = quiet.next()
	require.False(t, ok, "the stream closes after its end")

	// Shutdown: the open stream gets its end at once and Stop returns.
	open := fs.subscribe("from=beginning")
	open.events(3)
	stopped := make(chan error, 1)
	go func() { stopped <- fs.stop() }()
	var last frame
	for {
		f, ok := open.next()
		if !ok {
			break
		}
		last = f
	}
	require.Equal(t, "end", last.event)
	require.Contains(t, last.data, `"reason":"shutdown"`)
	require.NoError(t, <-stopped)
}

// countingLog counts the feed's reads of the log.
type countingLog struct {
	readstore.Log
	tails, ends atomic.Int64
}

func (c *countingLog) Tail(ctx context.Context, after oplog.Cursor, limit int) (oplog.TailPage, error) {
	c.tails.Add(1)
	return c.Log.Tail(ctx, after, limit)
}

func (c *countingLog) TailEnd(ctx context.Context) (oplog.TailEnd, error) {
	c.ends.Add(1)
	return c.Log.TailEnd(ctx)
}

// Subscribers idle at the head share one poll of the tail's end per
// interval; none of them reads the tail until the log grows, and then each
// gets the new event.
func TestFeedSharesThePolling(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	w := newLogWriter(t, env)
	cl := &countingLog{Log: env.Log}
	const interval = 50 * time.Millisecond
	fs := startFeed(t, env, readstore.Config{FeedPollInterval: interval, FeedMaxStreams: 100}, cl)
	const n = 20
	subs := make([]*subscription, n)
	for i := range subs {
		subs[i] = fs.subscribe("from=beginning")
	}
	// Each stream reads the (empty) tail once, then waits on the hub.
	require.Eventually(t, func() bool { return cl.tails.Load() >= n }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(2 * interval)
	tails, ends, start := cl.tails.Load(), cl.ends.Load(), time.Now()
	time.Sleep(time.Second)
	polls := cl.ends.Load() - ends
	require.Equal(t, tails, cl.tails.Load(), "no idle subscriber reads the tail")
	require.LessOrEqual(t, polls, int64(time.Since(start)/interval)+2, "one poll per interval for all %d subscribers", n)
	require.Positive(t, polls)

	rows := w.commit(w.create("s", jsondoc.DocumentType, ""))
	for _, s := range subs {
		require.Equal(t, rows[0].JobID, s.events(1)[0].JobID)
	}
}
