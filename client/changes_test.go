package client_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/client"
)

// stream starts an event stream and returns a function writing one event.
func stream(w http.ResponseWriter) func(id, event, data string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	return func(id, event, data string) {
		fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", id, event, data)
		w.(http.Flusher).Flush()
	}
}

func change(cursor, jobID string) string {
	return `{"cursor":"` + cursor + `","kind":"relationship.added","kinds":["relationship.added","updated"],"jobId":"` + jobID + `","documentId":"d-1",` +
		`"documentType":"doclog/json","branch":"main","scopes":[{"scope":"global","fromIndex":4,"toIndex":5}],"timestampUtcMs":1764600000000}`
}

// collect reads n changes of the feed, or fails on an error.
func collect(t *testing.T, ctx context.Context, f *client.Feed, n int) []client.Change {
	t.Helper()
	var out []client.Change
	for ch, err := range f.All(ctx) {
		require.NoError(t, err)
		out = append(out, ch)
		if len(out) == n {
			break
		}
	}
	return out
}

// follow reads n changes of the feed q selects from the server at url.
func follow(t *testing.T, url string, cfg client.Config, q client.ChangesQuery, n int) []client.Change {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return collect(t, ctx, newTestClient(t, url, cfg).Changes(q), n)
}

// The feed resumes after the last id it read, heartbeat included, across
// a dropped connection, a 503 and the server's end of the stream, and asks
// with the same filters every time.
func TestFeedResumes(t *testing.T) {
	t.Parallel()
	s := newRecorder(t,
		func(w http.ResponseWriter, r *http.Request) {
			send := stream(w)
			send("1-1", "updated", change("1-1", "job-1"))
			send("3-0", "heartbeat", `{"cursor":"3-0"}`)
			// The handler returns: the connection ends without an end event.
		},
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"too many streams","requestId":"r"}}`))
		},
		func(w http.ResponseWriter, r *http.Request) {
			send := stream(w)
			send("4-1", "created", change("4-1", "job-2"))
			send("5-0", "end", `{"cursor":"5-0","reason":"max_age"}`)
		},
		func(w http.ResponseWriter, r *http.Request) {
			send := stream(w)
			send("6-1", "deleted", change("6-1", "job-3"))
			<-r.Context().Done()
		},
	)
	c := newTestClient(t, s.srv.URL, client.Config{WriteToken: "w", ReadToken: "r"})
	feed := c.Changes(client.ChangesQuery{DocumentIDs: []string{"d-1", "d-2"}, Kinds: []string{client.KindUpdated},
		Operations: true, FromBeginning: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := collect(t, ctx, feed, 3)

	require.Equal(t, []string{"job-1", "job-2", "job-3"}, []string{got[0].JobID, got[1].JobID, got[2].JobID})
	require.Equal(t, client.Change{Cursor: "1-1", Kind: "relationship.added", Kinds: []string{"relationship.added", "updated"}, JobID: "job-1",
		DocumentID: "d-1", DocumentType: "doclog/json", Branch: "main",
		Scopes: []client.ScopeRange{{Scope: "global", FromIndex: 4, ToIndex: 5}}, TimestampUtcMs: 1764600000000}, got[0])
	require.Equal(t, "6-1", feed.Cursor())

	reqs := s.requests()
	require.Len(t, reqs, 4)
	wantAfter := []string{"", "3-0", "3-0", "5-0"}
	for i, r := range reqs {
		require.Equal(t, "/v1/changes", r.URL.Path)
		q := r.URL.Query()
		require.Equal(t, []string{"d-1", "d-2"}, q["documentId"])
		require.Equal(t, []string{"updated"}, q["kind"])
		require.Equal(t, "true", q.Get("operations"))
		require.Equal(t, "text/event-stream", r.Header.Get("Accept"))
		require.Equal(t, "Bearer r", r.Header.Get("Authorization"), "the feed carries the read token")
		require.Equal(t, wantAfter[i], r.Header.Get("Last-Event-ID"), "connection %d", i)
		require.Equal(t, wantAfter[i], q.Get("after"), "connection %d", i)
		if i == 0 {
			require.Equal(t, "beginning", q.Get("from"))
		} else {
			require.Empty(t, q.Get("from"), "a cursor replaces from")
		}
	}
}

// A feed with a cursor starts after it, and a new iteration resumes where
// the last one stopped.
func TestFeedAfterAndReiteration(t *testing.T) {
	t.Parallel()
	next := map[string]string{"7-2": "7-3", "7-3": "9-1"}
	s := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		after := r.Header.Get("Last-Event-ID")
		send := stream(w)
		send(next[after], "updated", change(next[after], "job-after-"+after))
		<-r.Context().Done()
	})
	c := newTestClient(t, s.srv.URL, client.Config{})
	feed := c.Changes(client.ChangesQuery{After: "7-2"})
	require.Equal(t, "7-2", feed.Cursor())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Equal(t, "job-after-7-2", collect(t, ctx, feed, 1)[0].JobID)
	require.Equal(t, "job-after-7-3", collect(t, ctx, feed, 1)[0].JobID)
	require.Equal(t, "9-1", feed.Cursor())
}

// The heartbeat a stream starts with is its start position: a feed from
// now whose first connection ends before any change resumes there, not at
// the end of the log again.
func TestFeedResumesFromTheFirstHeartbeat(t *testing.T) {
	t.Parallel()
	s := newRecorder(t,
		func(w http.ResponseWriter, r *http.Request) {
			stream(w)("5-0", "heartbeat", `{"cursor":"5-0"}`)
		},
		func(w http.ResponseWriter, r *http.Request) {
			send := stream(w)
			send("5-0", "heartbeat", `{"cursor":"5-0"}`)
			send("6-1", "updated", change("6-1", "job-1"))
			<-r.Context().Done()
		},
	)
	require.Equal(t, "job-1", follow(t, s.srv.URL, client.Config{}, client.ChangesQuery{}, 1)[0].JobID)
	reqs := s.requests()
	require.Len(t, reqs, 2)
	require.Empty(t, reqs[0].Header.Values("Last-Event-ID"), "no empty Last-Event-ID: the server refuses one")
	require.Empty(t, reqs[0].URL.Query().Get("from"), "from=now is the server's default")
	require.Equal(t, "5-0", reqs[1].Header.Get("Last-Event-ID"))
}

// A connection silent for longer than FeedIdleTimeout is dropped and the
// feed resumes.
func TestFeedIdleTimeout(t *testing.T) {
	t.Parallel()
	s := newRecorder(t,
		func(w http.ResponseWriter, r *http.Request) {
			stream(w)("1-1", "updated", change("1-1", "job-1"))
			<-r.Context().Done()
		},
		func(w http.ResponseWriter, r *http.Request) {
			stream(w)("2-1", "updated", change("2-1", "job-2"))
			<-r.Context().Done()
		},
	)
	got := follow(t, s.srv.URL, client.Config{FeedIdleTimeout: 50 * time.Millisecond}, client.ChangesQuery{}, 2)
	require.Equal(t, "job-2", got[1].JobID)
	reqs := s.requests()
	require.Len(t, reqs, 2)
	require.Equal(t, "1-1", reqs[1].Header.Get("Last-Event-ID"))
}

// A refused query is yielded once, as an *APIError, and not retried.
func TestFeedRefusal(t *testing.T) {
	t.Parallel()
	s := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":"invalid_parameter","message":"kind: \"moved\" is not a kind","field":"kind","requestId":"r"}}`))
	})
	c := newTestClient(t, s.srv.URL, client.Config{})
	var errs []error
	for _, err := range c.Changes(client.ChangesQuery{Kinds: []string{"moved"}}).All(context.Background()) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.True(t, client.IsInvalid(errs[0]))
	require.Equal(t, "kind", client.AsAPIError(errs[0]).Field)
	require.Len(t, s.requests(), 1)
}

// A feed that never opened a stream gives up after MaxAttempts, with the
// last failure.
func TestFeedGivesUp(t *testing.T) {
	t.Parallel()
	s := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	})
	c := newTestClient(t, s.srv.URL, client.Config{MaxAttempts: 3})
	var errs []error
	for _, err := range c.Changes(client.ChangesQuery{}).All(context.Background()) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.Equal(t, http.StatusBadGateway, client.AsAPIError(errs[0]).StatusCode)
	require.ErrorContains(t, errs[0], "3 attempts to connect failed")
	require.Len(t, s.requests(), 3)
}

// Once a stream opened, the feed outlasts an outage longer than
// MaxAttempts and resumes where it was.
func TestFeedOutlastsAnOutage(t *testing.T) {
	t.Parallel()
	down := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
	s := newRecorder(t,
		func(w http.ResponseWriter, r *http.Request) {
			send := stream(w)
			send("1-0", "heartbeat", `{"cursor":"1-0"}`)
			send("2-1", "updated", change("2-1", "job-1"))
		},
		down, down, down, down,
		func(w http.ResponseWriter, r *http.Request) {
			send := stream(w)
			send("2-1", "heartbeat", `{"cursor":"2-1"}`)
			send("3-1", "updated", change("3-1", "job-2"))
			<-r.Context().Done()
		},
	)
	got := follow(t, s.srv.URL, client.Config{MaxAttempts: 2}, client.ChangesQuery{}, 2)
	require.Equal(t, "job-2", got[1].JobID)
	reqs := s.requests()
	require.Len(t, reqs, 6)
	for _, r := range reqs[1:] {
		require.Equal(t, "2-1", r.Header.Get("Last-Event-ID"))
	}
}

// An answer that is not an event stream ends the feed with an error.
func TestFeedNotAnEventStream(t *testing.T) {
	t.Parallel()
	s := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html></html>"))
	})
	c := newTestClient(t, s.srv.URL, client.Config{})
	var errs []error
	for _, err := range c.Changes(client.ChangesQuery{}).All(context.Background()) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorContains(t, errs[0], "not an event stream")
	require.Len(t, s.requests(), 1)
}

// The feed ends without an error when its context does, also while it
// waits for the next event.
func TestFeedStopsWithTheContext(t *testing.T) {
	t.Parallel()
	s := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		stream(w)("1-1", "updated", change("1-1", "job-1"))
		<-r.Context().Done()
	})
	c := newTestClient(t, s.srv.URL, client.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []client.Change
	for ch, err := range c.Changes(client.ChangesQuery{}).All(ctx) {
		require.NoError(t, err)
		got = append(got, ch)
		cancel()
	}
	require.Len(t, got, 1)
	require.Len(t, s.requests(), 1)
}
