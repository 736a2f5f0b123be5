package readstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/readstore/feed"
)

// follower is a subscriber on its own goroutine: it reconnects with the
// last id it received whenever its stream ends (its own disconnects, a
// restart of the server), until it has seen a heartbeat past done's
// transaction.
type follower struct {
	name, query string
	base        func() string
	// cut, if set, says after how many frames of a connection to hang up.
	cut  func() int
	done *atomic.Uint64 // the last transaction written, once the writer is done

	events   []feedEvent
	lastID   string
	connects int
	ends     map[string]int // end reasons received
	err      error
}

func (f *follower) run(client *http.Client) {
	f.ends = map[string]int{}
	for f.err == nil {
		finished, err := f.connect(client)
		if finished {
			return
		}
		if err != nil {
			// The server is restarting: try again shortly.
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// connect reads one connection; it reports whether the follower is done.
func (f *follower) connect(client *http.Client) (bool, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base()+readstore.ChangesPath+"?from=beginning&"+f.query, nil)
	if err != nil {
		f.err = err
		return true, err
	}
	if f.lastID != "" {
		req.Header.Set("Last-Event-ID", f.lastID)
	}
	res, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, fmt.Errorf("status %d", res.StatusCode)
	}
	f.connects++
	limit := -1
	if f.cut != nil {
		limit = f.cut()
	}
	sub := &subscription{t: nil, res: res, sc: bufio.NewScanner(res.Body)}
	sub.sc.Buffer(make([]byte, 64<<10), 16<<20)
	for frames := 0; limit < 0 || frames < limit; frames++ {
		fr, ok := sub.nextFrame()
		if sub.odd != "" {
			f.err = fmt.Errorf("unexpected stream line %q", sub.odd)
			return true, f.err
		}
		if !ok {
			return false, errors.New("the stream closed")
		}
		switch fr.event {
		case "end":
			f.ends[fr.data[strings.Index(fr.data, `"reason":"`)+10:len(fr.data)-2]]++
			f.lastID = fr.id
			return false, nil
		case "heartbeat":
			f.lastID = fr.id
			pos, err := feed.ParsePosition(fr.id)
			if err != nil {
				f.err = err
				return true, err
			}
			if d := f.done.Load(); d != 0 && pos.Tx > d {
				return true, nil
			}
		default:
			var e feedEvent
			if err := jsonUnmarshal([]byte(fr.data), &e); err != nil || e.Cursor != fr.id || e.Kind != fr.event {
				f.err = fmt.Errorf("a bad event %q: %v", fr.data, err)
				return true, f.err
			}
			f.events = append(f.events, e)
			f.lastID = fr.id
		}
	}
	return false, nil // hung up on purpose
}

// The change feed end to end: 10,000 jobs over 100 documents, 50 jobs of
// many documents per transaction, with child and other links between them.
// The read store serves in the test's process for a third of the jobs and
// is stopped, then as a `doclog serve --roles=readstore` process on the
// same address, killed with SIGKILL after two thirds, then as another. A
// subscriber that hangs up at random points and resumes from its last id
// gets every event exactly once, each document's scopes contiguous from
// index 0 to the log's head; filtered subscribers get exactly their subset;
// consumers that stop reading are cut off while the server's heap stays
// bounded, and resuming from the last id one of them read continues with
// no gap.
func TestFeedAcceptance(t *testing.T) {
	env := projtest.New(t)
	w := newLogWriter(t, env)
	rng := rand.New(rand.NewPCG(7, 11))
	const (
		nDocs    = 100
		nJobs    = 10_000
		perTx    = 50
		parents  = 5
		writeCap = time.Second
	)
	reg := prometheus.NewRegistry()
	cfg := readstore.Config{FeedHeartbeat: 200 * time.Millisecond, FeedWriteTimeout: writeCap, FeedPageSize: 64, FeedPollInterval: 20 * time.Millisecond}
	// The read store first runs in the test's process, then as `doclog
	// serve --roles=readstore` processes on the same address.
	srv := startFeedWith(t, env, cfg, reg)
	addr := srv.srv.Addr().String()
	serve := []string{"--roles=readstore", "--readstore-addr=" + addr, "--ops-addr=127.0.0.1:0", "--log-level=error",
		"--database-url=" + env.Pool.Config().ConnString(), "--migrate=auto",
		"--readstore-feed-heartbeat=200ms", "--readstore-feed-write-timeout=1s", "--readstore-feed-page-size=64",
		"--readstore-feed-poll-interval=20ms"}

	// The documents: a third doclog/drive, the rest doclog/json.
	docs := make([]string, nDocs)
	var create []job
	typeOf := map[string]string{}
	for i := range docs {
		docs[i] = fmt.Sprintf("doc-%03d", i)
		typeOf[docs[i]] = jsondoc.DocumentType
		if i%3 == 2 {
			typeOf[docs[i]] = drive.DocumentType
		}
		create = append(create, w.create(docs[i], typeOf[docs[i]], ""))
	}
	folders := 0
	links := map[[2]string]string{} // parent, child: the link's type
	nextJob := func() job {
		d := docs[rng.IntN(nDocs)]
		switch r := rng.IntN(100); {
		case r < 20 && d < docs[parents]: // a parent links or unlinks
			child := docs[parents+rng.IntN(nDocs-parents)]
			if p := docs[rng.IntN(parents)]; rng.IntN(4) == 0 && p != d {
				child = p // a parent's child may be a parent
			}
			k := [2]string{d, child}
			if typ, ok := links[k]; ok {
				delete(links, k)
				return w.link(d, child, typ, false)
			}
			typ := []string{"", model.RelationshipChild, "ref"}[rng.IntN(3)]
			links[k] = typ
			return w.link(d, child, typ, true)
		case r < 30:
			return w.rename(d)
		}
		if typeOf[d] == drive.DocumentType {
			folders++
			return job{doc: d, actions: []oplog.Action{w.action(oplog.ScopeGlobal, drive.ActionAddFolder,
				drive.AddFolderInput{ID: fmt.Sprintf("f%d", folders), Name: "folder"})}}
		}
		scope := oplog.ScopeGlobal
		if rng.IntN(4) == 0 {
			scope = oplog.ScopeLocal
		}
		return w.patch(d, scope, rng.IntN(1000))
	}

	var done atomic.Uint64
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	base := srv.base
	baseFn := func() string { return base }
	var cutMu sync.Mutex
	cutRng := rand.New(rand.NewPCG(3, 5))
	resuming := &follower{name: "resuming", query: "operations=true", base: baseFn, done: &done, cut: func() int {
		cutMu.Lock()
		defer cutMu.Unlock()
		return 1 + cutRng.IntN(600)
	}}
	byType := &follower{name: "drive updates", query: "documentType=doclog/drive&kind=updated", base: baseFn, done: &done}
	byParent := &follower{name: "children", query: "parent=doc-000&parent=doc-001", base: baseFn, done: &done}
	followers := []*follower{resuming, byType, byParent}
	var wg sync.WaitGroup
	for _, f := range followers {
		wg.Go(func() { f.run(client) })
	}

	// Write, moving the read store to a process of its own after a third
	// of the jobs and killing that process after two thirds.
	var process *exec.Cmd
	killed := false
	jobIDs := map[string]bool{}
	record := func(rows []oplog.Operation) {
		for _, op := range rows {
			jobIDs[op.JobID] = true
		}
	}
	record(w.commit(create...))
	for written := len(create); written < nJobs; {
		batch := make([]job, 0, perTx)
		for len(batch) < perTx && written+len(batch) < nJobs {
			batch = append(batch, nextJob())
		}
		rows := w.commit(batch...)
		record(rows)
		written += len(batch)
		switch {
		case process == nil && written >= nJobs/3:
			// A graceful stop: every stream gets event: end.
			require.NoError(t, srv.stop())
			process = startServeProcess(t, serve...)
		case !killed && written >= 2*nJobs/3:
			// A crash: the streams break off.
			killed = true
			kill(process)
			process = startServeProcess(t, serve...)
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.Len(t, jobIDs, nJobs)
	end, err := env.Log.TailEnd(context.Background())
	require.NoError(t, err)
	done.Store(end.Last)

	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(90 * time.Second):
		t.Fatalf("the followers did not catch up within 90s: %d, %d, %d events", len(resuming.events), len(byType.events), len(byParent.events))
	}
	for _, f := range followers {
		require.NoError(t, f.err, f.name)
	}
	kill(process)
	// The followers that never hang up were connected when the server
	// stopped; the other may have been between two connections. The killed
	// process sent no end.
	require.Equal(t, map[string]int{"shutdown": 1}, byType.ends, "the graceful stop ended the stream with event: end")
	require.Equal(t, map[string]int{"shutdown": 1}, byParent.ends, "the graceful stop ended the stream with event: end")
	require.LessOrEqual(t, resuming.ends["shutdown"], 1)
	require.GreaterOrEqual(t, byType.connects, 3, "the filtered follower reconnected after the stop and the kill")
	t.Logf("resuming subscriber: %d events over %d connections; the filtered ones %d and %d connections", len(resuming.events), resuming.connects, byType.connects, byParent.connects)
	require.Greater(t, resuming.connects, 10)

	// Exactly once, per document in index order, contiguous from 0 to the
	// head the log reports.
	all := resuming.events
	require.Len(t, all, nJobs)
	seen := map[string]bool{}
	next := map[oplog.StreamKey]int64{}
	for _, e := range all {
		require.False(t, seen[eventKey(e)], "event %s twice", eventKey(e))
		seen[eventKey(e)] = true
		require.True(t, jobIDs[e.JobID])
		for _, s := range e.Scopes {
			k := oplog.StreamKey{DocumentID: e.DocumentID, Scope: s.Scope, Branch: e.Branch}
			require.Equal(t, next[k], s.FromIndex, "%s continues where it stopped", k)
			next[k] = s.ToIndex + 1
		}
	}
	heads, err := env.Log.Heads(context.Background(), docs)
	require.NoError(t, err)
	require.Equal(t, heads, next, "every stream reaches the log's head")

	// The filtered subscribers: exactly their subset, in the feed's order.
	var wantType, wantParent []string
	childOf := map[[3]string]bool{} // parent, branch, child
	for _, e := range all {
		if e.DocumentType == drive.DocumentType && slices.Contains(e.Kinds, "updated") {
			wantType = append(wantType, eventKey(e))
		}
		if childOf[[3]string{"doc-000", e.Branch, e.DocumentID}] || childOf[[3]string{"doc-001", e.Branch, e.DocumentID}] {
			wantParent = append(wantParent, eventKey(e))
		}
		for _, op := range e.Operations {
			add := op.Action.Type == model.ActionAddRelationship
			if !add && op.Action.Type != model.ActionRemoveRelationship {
				continue
			}
			var in model.RelationshipInput
			require.NoError(t, jsonUnmarshal(op.Action.Input, &in))
			if in.Type == "" || in.Type == model.RelationshipChild {
				childOf[[3]string{e.DocumentID, e.Branch, in.TargetID}] = add
			}
		}
	}
	require.Equal(t, wantType, keys(byType.events), "documentType and kind")
	require.Equal(t, wantParent, keys(byParent.events), "parent")
	require.Greater(t, len(wantParent), 100)
	t.Logf("filtered: %d drive updates, %d events of children", len(wantType), len(wantParent))

	// Consumers that never read: the server (in the test's process again,
	// to measure its heap) cuts each off once a write blocks past the write
	// timeout, holding a bounded amount meanwhile.
	srv = startFeedWith(t, env, cfg, reg)
	const stuck = 10
	// The heap the last collection found live: what the process holds, not
	// the garbage the streams make between a collection and the reading.
	heap := func() uint64 {
		runtime.GC()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	before := heap()
	// A write that times out also cancels the request's context inside
	// net/http, so a stream cut off for its slowness may report either
	// reason; both mean the server ended it without the consumer reading.
	ends := func() (cut float64, all map[string]float64) {
		all = map[string]float64{}
		for _, r := range []string{"write_failed", "client_gone", "error", "shutdown", "max_age"} {
			all[r] = metricValue(t, reg, "doclog_readstore_feed_ends_total", "reason", r)
		}
		return all["write_failed"] + all["client_gone"], all
	}
	cutBefore, _ := ends()
	conns := make([]net.Conn, stuck)
	for i := range conns {
		conns[i] = dialStuck(t, srv.srv.Addr().String(), "/v1/changes?from=beginning&operations=true")
	}
	start := time.Now()
	var peak uint64
	for {
		cut, all := ends()
		open := metricValue(t, reg, "doclog_readstore_feed_streams")
		if cut-cutBefore >= stuck && open == 0 {
			break
		}
		require.Less(t, time.Since(start), 90*time.Second,
			"the stuck consumers were not cut off: %v of them so far; ends by reason %v; streams open %v, refused %v", cut-cutBefore, all,
			open, metricValue(t, reg, "doclog_readstore_feed_refused_total"))
		peak = max(peak, heap())
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d stuck consumers cut off after %s (write timeout %s); live heap %d KiB before, at most %d KiB while they were held",
		stuck, time.Since(start).Round(time.Millisecond), writeCap, before>>10, peak>>10)
	// What one stream of the whole log with its operations amounts to: a
	// queue per consumer would hold most of it for each of them.
	streamBytes := 0
	for _, e := range all {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		streamBytes += len(b)
	}
	const bound = 16 << 20
	t.Logf("one stream of the log is %d KiB; %d of them %d MiB", streamBytes>>10, stuck, stuck*streamBytes>>20)
	require.Greater(t, stuck*streamBytes, 4*bound, "the log is large enough for a queue per consumer to break the bound")
	require.Less(t, int64(peak)-int64(before), int64(bound), "the server's heap stays bounded while consumers do not read")

	// Resuming from the last id one of them had read continues with no gap.
	body := readStuck(t, conns[0])
	var lastID string
	sc := &subscription{sc: bufio.NewScanner(strings.NewReader(body))}
	sc.sc.Buffer(make([]byte, 64<<10), 16<<20)
	for {
		fr, ok := sc.nextFrame()
		if !ok {
			break
		}
		if fr.event != "heartbeat" && fr.event != "end" && strings.HasSuffix(fr.data, "}") {
			lastID = fr.id
		}
	}
	require.NotEmpty(t, lastID, "the stuck consumer received events before it was cut off")
	at := slices.IndexFunc(all, func(e feedEvent) bool { return e.Cursor == lastID })
	require.GreaterOrEqual(t, at, 0)
	rest := all[at+1:]
	sub := srv.subscribe("after=" + lastID)
	require.Equal(t, keys(rest[:min(len(rest), 500)]), keys(sub.events(min(len(rest), 500))), "resumed after %s", lastID)
	for _, c := range conns {
		_ = c.Close()
	}
}

// dialStuck sends a GET over a connection with a small receive buffer and
// never reads from it.
func dialStuck(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
	require.NoError(t, err)
	return c
}

// readStuck reads what the stuck connection still holds, the response's
// body decoded from its chunks, up to where the server cut it off.
func readStuck(t *testing.T, c net.Conn) string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			require.False(t, errors.Is(err, context.DeadlineExceeded) || isTimeout(err), "the server did not close the stuck connection: %v", err)
			return b.String()
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
