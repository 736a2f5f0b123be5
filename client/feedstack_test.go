package client_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/client"
)

// patchedDocument creates a named document and submits n patches to it,
// and returns once the last is committed, with the ids of the create and
// the patches in commit order.
func patchedDocument(t *testing.T, ctx context.Context, c *client.Client, n int) (*client.Accepted, []string) {
	t.Helper()
	acc, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json", Name: "fed"})
	require.NoError(t, err)
	jobs := []string{acc.JobID}
	for i := range n {
		j, err := c.SubmitJob(ctx, client.Job{DocumentID: acc.DocumentID, DocumentType: "doclog/json",
			Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"i": i}}}})
		require.NoError(t, err)
		jobs = append(jobs, j.JobID)
	}
	_, err = c.WaitJob(ctx, jobs[len(jobs)-1])
	require.NoError(t, err)
	return acc, jobs
}

// The feed of the real read store: a document's changes in order, with
// their operations; a second feed resumed after the first change's cursor
// gets the rest, neither skipping nor repeating one; a kind filter; and a
// bad kind refused before any event.
func TestFeedOfTheReadStore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := stackClient(t)
	acc, jobs := patchedDocument(t, ctx, c, 3)

	q := client.ChangesQuery{DocumentIDs: []string{acc.DocumentID}, FromBeginning: true, Operations: true}
	feed := c.Changes(q)
	got := collect(t, ctx, feed, len(jobs))
	for i, ch := range got {
		require.Equal(t, jobs[i], ch.JobID)
		require.Equal(t, acc.DocumentID, ch.DocumentID)
		require.Equal(t, "doclog/json", ch.DocumentType)
		require.Equal(t, "main", ch.Branch)
		require.NotEmpty(t, ch.Cursor)
		require.NotEmpty(t, ch.Operations)
		for _, op := range ch.Operations {
			require.Equal(t, jobs[i], op.JobID)
		}
	}
	require.Equal(t, client.KindCreated, got[0].Kind)
	require.Contains(t, got[0].Kinds, client.KindUpdated, "the create job also named the document")
	for _, ch := range got[1:] {
		require.Equal(t, client.KindUpdated, ch.Kind)
		require.Equal(t, []client.ScopeRange{{Scope: "global", FromIndex: ch.Scopes[0].FromIndex, ToIndex: ch.Scopes[0].FromIndex}}, ch.Scopes)
	}
	require.Equal(t, got[len(got)-1].Cursor, feed.Cursor())

	resumed := collect(t, ctx, c.Changes(client.ChangesQuery{DocumentIDs: []string{acc.DocumentID}, After: got[0].Cursor}), len(jobs)-1)
	for i, ch := range resumed {
		require.Equal(t, jobs[i+1], ch.JobID, "resumed after the first change")
	}

	creates := collect(t, ctx, c.Changes(client.ChangesQuery{DocumentIDs: []string{acc.DocumentID}, FromBeginning: true,
		Kinds: []string{client.KindCreated}}), 1)
	require.Equal(t, acc.JobID, creates[0].JobID)

	var errs []error
	for _, err := range c.Changes(client.ChangesQuery{Kinds: []string{"moved"}}).All(ctx) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.True(t, client.IsInvalid(errs[0]), "%v", errs[0])
}

// cutTransport cuts the first change-feed connection right after its first
// change, as a network failure would (unless keep is set), and records the
// Last-Event-ID of each connection.
type cutTransport struct {
	// keep leaves every connection whole: the transport only records.
	keep        bool
	mu          sync.Mutex
	connections int
	lastIDs     []string
}

func (c *cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.URL.Path != "/v1/changes" {
		return resp, err
	}
	c.mu.Lock()
	c.connections++
	first := c.connections == 1 && !c.keep
	c.lastIDs = append(c.lastIDs, r.Header.Get("Last-Event-ID"))
	c.mu.Unlock()
	if first {
		resp.Body = &cutAfterEvent{body: resp.Body}
	}
	return resp, nil
}

// cutAfterEvent passes the stream on up to the end of its first change
// (the blank line after the first block naming a job; the heartbeat the
// stream starts with passes), then fails.
type cutAfterEvent struct {
	body io.ReadCloser
	seen []byte
	// from is where the block being read starts in seen.
	from int
	cut  bool
}

func (c *cutAfterEvent) Read(p []byte) (int, error) {
	if c.cut {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.body.Read(p)
	before := len(c.seen)
	c.seen = append(c.seen, p[:n]...)
	for {
		i := bytes.Index(c.seen[c.from:], []byte("\n\n"))
		if i < 0 {
			return n, err
		}
		end := c.from + i + 2
		if bytes.Contains(c.seen[c.from:end], []byte(`"jobId"`)) {
			c.cut = true
			return end - before, nil
		}
		c.from = end
	}
}

func (c *cutAfterEvent) Close() error { return c.body.Close() }

// A connection to the real read store cut after the first change: the feed
// reconnects with that change's cursor and delivers the rest, each change
// once and in order.
func TestFeedResumesFromTheReadStore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := stackClient(t)
	acc, jobs := patchedDocument(t, ctx, c, 2)

	tr := &cutTransport{}
	cut, err := client.New(client.Config{ReadstoreURL: readstoreURL, Token: readToken, HTTPClient: &http.Client{Transport: tr},
		BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond})
	require.NoError(t, err)
	got := collect(t, ctx, cut.Changes(client.ChangesQuery{DocumentIDs: []string{acc.DocumentID}, FromBeginning: true}), len(jobs))
	for i, ch := range got {
		require.Equal(t, jobs[i], ch.JobID)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.Equal(t, 2, tr.connections)
	require.Equal(t, []string{"", got[0].Cursor}, tr.lastIDs)
}

// A read store stopped under a feed ends its stream (event: end, shutdown)
// and one started on the same address takes over: the feed reconnects
// with the cursor of the end and delivers the changes committed meanwhile,
// each once and in order.
func TestFeedAcrossAReadStoreRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := stackClient(t)
	acc, err := c.CreateDocument(ctx, client.CreateDocument{DocumentType: "doclog/json"})
	require.NoError(t, err)
	_, err = c.WaitJob(ctx, acc.JobID)
	require.NoError(t, err)

	rs, err := newReadstore("127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, rs.Start(ctx))
	addr := rs.Addr().String()
	defer func() { _ = rs.Stop(context.Background()) }()
	tr := &cutTransport{keep: true}
	fc, err := client.New(client.Config{ReadstoreURL: "http://" + addr, Token: readToken, HTTPClient: &http.Client{Transport: tr},
		BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond})
	require.NoError(t, err)

	jobs := []string{acc.JobID}
	var got []string
	for ch, err := range fc.Changes(client.ChangesQuery{DocumentIDs: []string{acc.DocumentID}, FromBeginning: true}).All(ctx) {
		require.NoError(t, err)
		got = append(got, ch.JobID)
		if len(got) == 1 {
			// The feed waits at the head: stop the server under it, start
			// another on its address, then write more.
			require.NoError(t, rs.Stop(ctx))
			rs, err = newReadstore(addr)
			require.NoError(t, err)
			require.NoError(t, rs.Start(ctx))
			for i := range 2 {
				j, err := c.SubmitJob(ctx, client.Job{DocumentID: acc.DocumentID, DocumentType: "doclog/json",
					Actions: []client.Action{{Type: "MERGE_PATCH", Scope: "global", Input: map[string]any{"i": i}}}})
				require.NoError(t, err)
				jobs = append(jobs, j.JobID)
			}
		}
		if len(got) == 3 {
			break
		}
	}
	require.Equal(t, jobs, got)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.GreaterOrEqual(t, tr.connections, 2)
	require.Empty(t, tr.lastIDs[0])
	require.NotEmpty(t, tr.lastIDs[1], "the reconnect resumes from a cursor")
}
