package readstore_test

import (
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/readstore"
)

// TestReadYourWrites: a read carrying a job's token returns the job's
// effects every time, while the projection lags — first because the
// projectors start only after the reads began waiting, then because each
// read follows its job's announcement at once.
func TestReadYourWrites(t *testing.T) {
	t.Parallel()
	b := setup(t, readstore.Config{})
	doc, rec := b.w.Create("ryw-1", jsondoc.DocumentType, "ryw")
	b.env.Publish(rec)
	tok := tokenOf(rec.ConsistencyToken)

	// No projector runs yet: without a token the read is stale.
	res := get(t, b.h, "/v1/documents/ryw-1")
	require.Equal(t, 404, res.status, "without a token the view may lag: %s", res.body)

	// Reads with the token wait; they are all waiting on the shared
	// poller before the projectors start.
	const readers = 8
	results := make(chan response, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			path := "/v1/documents/ryw-1?wait=30s"
			header := []string{readstore.TokenHeader, tok}
			if i%2 == 1 {
				path += "&consistencyToken=" + url.QueryEscape(tok)
				header = nil
			}
			res, _ := serve(b.h, path, header...)
			results <- res
		})
	}
	require.Eventually(t, func() bool { return b.metric("doclog_readstore_waiting_reads") == readers }, 10*time.Second, 5*time.Millisecond)
	b.startProjectors()
	wg.Wait()
	close(results)
	for res := range results {
		require.Equal(t, 200, res.status, "%s", res.body)
		var d documentBody
		res.decode(t, &d)
		require.Equal(t, "ryw", d.Slug)
	}
	// The same check reports READ_READY to ingest.
	var ready ingest.ReadReadiness = readstore.ReadReadiness{Store: b.store}
	ok, err := ready.ReadReady(t.Context(), rec.ConsistencyToken)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = ready.ReadReady(t.Context(), oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{
		{DocumentID: "ryw-1", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch, Index: 0},
	}})
	require.NoError(t, err)
	require.False(t, ok, "nothing was written to the global scope yet")

	// Every write read back with its token sees its effect, through the
	// document view, the relationship index and the log.
	other, orec := b.w.Create("ryw-2", jsondoc.DocumentType, "")
	b.env.Publish(orec)
	stale := 0
	for i := range 20 {
		rec, err := b.w.Job(doc, b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"n": i}))
		require.NoError(t, err)
		b.env.Publish(rec)
		tok := tokenOf(rec.ConsistencyToken)

		if res := get(t, b.h, "/v1/documents/ryw-1?scope=global"); res.status == 200 {
			var d documentBody
			res.decode(t, &d)
			if d.Scopes["global"].Revision < int64(i+1) {
				stale++
			}
		}
		res := get(t, b.h, "/v1/documents/ryw-1?scope=global", readstore.TokenHeader, tok)
		require.Equal(t, 200, res.status, "%s", res.body)
		var d documentBody
		res.decode(t, &d)
		require.Equal(t, int64(i+1), d.Scopes["global"].Revision)
		require.Equal(t, map[string]any{"n": float64(i)}, d.Scopes["global"].State)

		res = get(t, b.h, "/v1/documents/ryw-1/operations", readstore.TokenHeader, tok)
		require.Equal(t, 200, res.status, "%s", res.body)
		var ops opsBody
		res.decode(t, &ops)
		require.Len(t, ops.Operations, i+1)
	}
	t.Logf("%d of 20 reads without a token were stale", stale)
	require.GreaterOrEqual(t, b.metric("doclog_readstore_token_waits_total", "source", "docview", "outcome", "reached"), float64(readers),
		"every early reader was served by the shared poller")

	// The relationship index honours tokens too.
	for i, target := range []string{other.ID, "ryw-x"} {
		rec, err := b.w.Job(doc, b.w.Action(oplog.ScopeDocument, model.ActionAddRelationship, model.RelationshipInput{TargetID: target, Type: "ref"}))
		require.NoError(t, err)
		b.env.Publish(rec)
		res := get(t, b.h, "/v1/documents/ryw-1/relationships?direction=out", readstore.TokenHeader, tokenOf(rec.ConsistencyToken))
		require.Equal(t, 200, res.status, "%s", res.body)
		var rels relsBody
		res.decode(t, &rels)
		require.Len(t, rels.Relationships, i+1)
	}
}

// A read waiting on its token is woken by the projector's notification of
// its commit (pgread's WatchProgress), not by the poll: with a poll
// interval of an hour, it is answered as soon as the view has the write.
func TestProgressNotificationWakesTokenWait(t *testing.T) {
	t.Parallel()
	b := setupStore(t, readstore.Config{PollInterval: time.Hour}, true)
	b.startProjectors()
	// The handler listens from its first wait: a read waits for a
	// document not yet announced, and documents are announced until a
	// commit is notified, which wakes it.
	_, first := b.w.Create("woken-0", jsondoc.DocumentType, "")
	warm := b.waitingRead("woken-0", first.ConsistencyToken)
	b.env.Publish(first)
	n := 0
	require.Eventually(t, func() bool {
		if b.metric("doclog_readstore_progress_notifications_total", "source", "docview") >= 1 {
			return true
		}
		n++
		_, rec := b.w.Create(fmt.Sprintf("woken-warm-%d", n), jsondoc.DocumentType, "")
		b.env.Publish(rec)
		return false
	}, time.Minute, 50*time.Millisecond, "the document view's commits are notified")
	select {
	case res := <-warm:
		require.Equal(t, 200, res.status, "%s", res.body)
	case <-time.After(2 * time.Minute):
		t.Fatal("the first waiting read was not woken by a notified commit")
	}

	// The read waits before its job is announced, so only a round after
	// the projector's commit answers it, and the poll's is an hour away.
	_, rec := b.w.Create("woken-1", jsondoc.DocumentType, "woken")
	done := b.waitingRead("woken-1", rec.ConsistencyToken)
	published := time.Now()
	b.env.Publish(rec)
	select {
	case res := <-done:
		require.Equal(t, 200, res.status, "%s", res.body)
		var d documentBody
		res.decode(t, &d)
		require.Equal(t, "woken", d.Slug)
		t.Logf("answered %s after the job's announcement", time.Since(published).Round(time.Millisecond))
	case <-time.After(2 * time.Minute):
		t.Fatal("the waiting read was not woken by the projector's commit")
	}
	require.Equal(t, 2.0, b.metric("doclog_readstore_token_waits_total", "source", "docview", "outcome", "reached"))
}

// waitingRead reads document id with token, waiting up to five minutes, and
// returns once the read waits on the shared poller (the only read waiting);
// its answer arrives on the channel.
func (b *bundle) waitingRead(id string, token oplog.ConsistencyToken) <-chan response {
	b.t.Helper()
	done := make(chan response, 1)
	go func() {
		res, _ := serve(b.h, "/v1/documents/"+id+"?wait=5m", readstore.TokenHeader, tokenOf(token))
		done <- res
	}()
	require.Eventually(b.t, func() bool { return b.metric("doclog_readstore_waiting_reads") == 1 }, 10*time.Second, 5*time.Millisecond)
	return done
}

func TestConsistencyTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, readstore.Config{})
	unreachable := tokenOf(oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{
		{DocumentID: "nope", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch, Index: 99},
	}})

	start := time.Now()
	res := get(t, b.h, "/v1/documents/nope?wait=200ms", readstore.TokenHeader, unreachable)
	require.Equal(t, 504, res.status, "%s", res.body)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	e := res.apiError(t)
	require.Equal(t, readstore.CodeConsistencyTimeout, e.Error.Code)
	require.Equal(t, readstore.TokenHeader, e.Error.Field)
	require.Contains(t, e.Error.Message, "docview did not reach the consistency token within 200ms: nope/global/main index 99 (applied -1)")

	res = get(t, b.h, "/v1/documents/nope/operations?wait=0&consistencyToken="+url.QueryEscape(unreachable))
	require.Equal(t, 504, res.status, "wait=0 answers at once: %s", res.body)
	require.Contains(t, res.apiError(t).Error.Message, "log did not reach")

	// The indexer keeps only the document scope: a token of other scopes
	// does not hold its reads back.
	res = get(t, b.h, "/v1/documents?wait=0", readstore.TokenHeader, unreachable)
	require.Equal(t, 200, res.status, "%s", res.body)

	// Closing the handler answers waiting reads at once.
	done := make(chan response, 1)
	go func() {
		res, _ := serve(b.h, "/v1/documents/nope?wait=30s", readstore.TokenHeader, unreachable)
		done <- res
	}()
	require.Eventually(t, func() bool { return b.metric("doclog_readstore_waiting_reads") == 1 }, 10*time.Second, 5*time.Millisecond)
	b.h.Close()
	res = <-done
	require.Equal(t, 503, res.status, "%s", res.body)
	require.Equal(t, readstore.CodeUnavailable, res.apiError(t).Error.Code)
	require.Equal(t, 503, get(t, b.h, "/readyz").status)

	require.Equal(t, 1.0, b.metric("doclog_readstore_token_waits_total", "source", "docview", "outcome", "timeout"))
	require.Equal(t, 1.0, b.metric("doclog_readstore_token_waits_total", "source", "log", "outcome", "timeout"))
	require.Equal(t, 1.0, b.metric("doclog_readstore_token_waits_total", "source", "docview", "outcome", "closed"))
	require.Equal(t, 0.0, b.metric("doclog_readstore_waiting_reads"))
	require.Equal(t, 1.0, b.metric("doclog_readstore_requests_total", "route", "GET /v1/documents/{idOrSlug}", "code", "504"))
	require.Equal(t, 1.0, b.metric("doclog_readstore_requests_total", "route", "GET /v1/documents/{idOrSlug}", "code", "503"))
}

// TestSharedPoller: many reads waiting at once cost one lookup per tick,
// not one per read.
func TestSharedPoller(t *testing.T) {
	t.Parallel()
	interval := 20 * time.Millisecond
	b := setup(t, readstore.Config{PollInterval: interval})
	const readers = 40
	wait := 400 * time.Millisecond
	var wg sync.WaitGroup
	start := time.Now()
	for i := range readers {
		wg.Go(func() {
			tok := tokenOf(oplog.ConsistencyToken{Coordinates: []oplog.Coordinate{
				{DocumentID: fmt.Sprintf("nope-%d", i), Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch, Index: 0},
			}})
			res, _ := serve(b.h, fmt.Sprintf("/v1/documents/x?wait=%s", wait), readstore.TokenHeader, tok)
			if res.status != 504 {
				t.Errorf("reader %d: %d %s", i, res.status, res.body)
			}
		})
	}
	wg.Wait()
	ticks := int64(time.Since(start)/interval) + 1
	calls := b.store.progressCalls.Load()
	t.Logf("%d readers over %s: %d lookups (%d ticks)", readers, time.Since(start), calls, ticks)
	// Each read checks once on arrival; then one lookup per tick serves
	// them all.
	require.LessOrEqual(t, calls, readers+ticks)
}

// TestQuarantinedStream: a read whose token names an operation the view
// quarantined answers 409 instead of waiting out its time.
func TestQuarantinedStream(t *testing.T) {
	t.Parallel()
	b := setup(t, readstore.Config{})
	doc, rec := b.w.Create("q-1", jsondoc.DocumentType, "")
	bad, err := b.w.JobWith(doc, func(ops []oplog.Operation) { ops[0].Hash = "not-the-hash" },
		b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"a": 1}))
	require.NoError(t, err)
	// A forged hash on a document scope quarantines it in the relationship
	// index too.
	doc2, rec2 := b.w.Create("q-2", jsondoc.DocumentType, "")
	bad2, err := b.w.JobWith(doc2, func(ops []oplog.Operation) { ops[0].Hash = "not-the-hash" },
		b.w.Action(oplog.ScopeDocument, model.ActionSetName, model.SetNameInput{Name: "renamed"}))
	require.NoError(t, err)
	b.env.Publish(rec, bad, rec2, bad2)
	b.startProjectors()

	start := time.Now()
	res := get(t, b.h, "/v1/documents/q-1?wait=30s", readstore.TokenHeader, tokenOf(bad.ConsistencyToken))
	require.Equal(t, 409, res.status, "%s", res.body)
	require.Less(t, time.Since(start), 20*time.Second)
	e := res.apiError(t)
	require.Equal(t, readstore.CodeStreamQuarantined, e.Error.Code)
	require.Contains(t, e.Error.Message, "docview quarantined stream q-1/global/main at index 0")
	require.Contains(t, e.Error.Message, "doclogctl docs quarantine lift q-1 --projector docview --scope global --branch main")
	require.Contains(t, e.Error.Message, "HashMismatch")

	res = get(t, b.h, "/v1/documents/q-2/relationships?wait=30s", readstore.TokenHeader, tokenOf(bad2.ConsistencyToken))
	require.Equal(t, 409, res.status, "%s", res.body)
	require.Contains(t, res.apiError(t).Error.Message, "indexer quarantined stream q-2/document/main at index 1")
	res = get(t, b.h, "/v1/documents?wait=30s", readstore.TokenHeader, tokenOf(bad2.ConsistencyToken))
	require.Equal(t, 409, res.status, "%s", res.body)

	// The document scope is not quarantined: its token is served.
	res = get(t, b.h, "/v1/documents/q-1?wait=30s", readstore.TokenHeader, tokenOf(rec.ConsistencyToken))
	require.Equal(t, 200, res.status, "%s", res.body)
	// The log itself holds the operation; replaying it disagrees with its
	// stored hash.
	res = get(t, b.h, "/v1/documents/q-1/state?scope=global")
	require.Equal(t, 500, res.status, "%s", res.body)
	require.Equal(t, readstore.CodeReplayFailed, res.apiError(t).Error.Code)
}
