package logtest

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
)

// tailUntil pages the tail from c until it has seen every wanted opId or the
// deadline passes; other tests' writes may appear in between.
func tailUntil(t *testing.T, s oplog.Store, c oplog.Cursor, want map[string]bool) ([]oplog.Operation, oplog.Cursor) {
	t.Helper()
	var seen []oplog.Operation
	found := 0
	deadline := time.Now().Add(30 * time.Second)
	for found < len(want) {
		page, err := s.Tail(ctx(t), c, 500)
		require.NoError(t, err)
		for _, op := range page.Operations {
			if want[op.OpID] {
				seen = append(seen, op)
				found++
			}
		}
		c = page.Next
		if len(page.Operations) == 0 {
			require.True(t, time.Now().Before(deadline), "tail did not reach %d operations (saw %d)", len(want), found)
			time.Sleep(20 * time.Millisecond)
		}
	}
	return seen, c
}

func testTailPagesEverything(t *testing.T, h Harness) {
	s := h.NewStore(t)
	want := map[string]bool{}
	var order []string
	for range 5 {
		k := stream(oplog.ScopeGlobal)
		res := appendOne(t, s, request(k, 0, 7))
		require.NoError(t, res.Err)
		for _, op := range res.Operations {
			want[op.OpID] = true
			order = append(order, op.OpID)
		}
	}
	seen, _ := tailUntil(t, s, "", want)
	got := make([]string, len(seen))
	for i, op := range seen {
		got[i] = op.OpID
	}
	require.Equal(t, order, got, "the tail returns every row once, in commit order")

	_, err := s.Tail(ctx(t), "not-a-cursor", 10)
	require.Error(t, err)
}

func testTailWaitsForOpenTransaction(t *testing.T, h Harness) {
	s := h.NewStore(t)
	slowStream := stream(oplog.ScopeGlobal)
	slow := ops(slowStream, newJobID(), 0, 1)[0]
	commit := h.HoldTransaction(t, s, slow)

	fast := stream(oplog.ScopeGlobal)
	res := appendOne(t, s, request(fast, 0, 3))
	require.NoError(t, res.Err)
	require.Greater(t, res.Operations[0].Ordinal, int64(0))

	// While the slow transaction is open, the tail must not pass it: the
	// fast rows, committed with later transaction ids, stay invisible.
	for range 5 {
		page, err := s.Tail(ctx(t), "", 10_000)
		require.NoError(t, err)
		for _, op := range page.Operations {
			require.NotEqual(t, fast, op.Stream(), "the tail passed an open transaction")
		}
		time.Sleep(20 * time.Millisecond)
	}
	commit()

	want := map[string]bool{slow.OpID: true}
	for _, op := range res.Operations {
		want[op.OpID] = true
	}
	seen, _ := tailUntil(t, s, "", want)
	require.Equal(t, slow.OpID, seen[0].OpID, "the slow row comes first: nothing was skipped")
	require.Len(t, seen, 4)
}

func testStreamLatestTimestamp(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	_, ok, err := s.StreamLatestTimestamp(ctx(t), k)
	require.NoError(t, err)
	require.False(t, ok)

	req := request(k, 0, 3)
	// Out of index order: the largest timestamp sits at index 1.
	for i, ts := range []int64{1000, 5000, 2000} {
		req.Streams[0].Operations[i].TimestampUtcMs = ts
	}
	require.NoError(t, appendOne(t, s, req).Err)
	ts, ok, err := s.StreamLatestTimestamp(ctx(t), k)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(5000), ts)
}

func testRevisions(t *testing.T, h Harness) {
	s := h.NewStore(t)
	g := stream(oplog.ScopeGlobal)
	d := oplog.StreamKey{DocumentID: g.DocumentID, Scope: oplog.ScopeDocument, Branch: g.Branch}
	job := newJobID()
	req := oplog.AppendRequest{
		DocumentID: g.DocumentID,
		Jobs:       []oplog.JobOutcome{{JobID: job, Status: oplog.JobWriteReady}},
		Streams: []oplog.StreamAppend{
			{Stream: d, ExpectedRevision: 0, Operations: ops(d, job+"-d", 0, 1)},
			{Stream: g, ExpectedRevision: 0, Operations: ops(g, job, 0, 4)},
		},
	}
	req.Streams[0].Operations[0].JobID = job
	res := appendOne(t, s, req)
	require.NoError(t, res.Err)
	require.Len(t, res.Jobs[0].Streams, 2, "a job spanning two scopes records both ranges")

	revs, err := s.Revisions(ctx(t), g.DocumentID, oplog.DefaultBranch)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{oplog.ScopeDocument: 1, oplog.ScopeGlobal: 4}, revs.Revision)
	require.Equal(t, int64(1_700_000_000_003), revs.LatestTimestamp)

	empty, err := s.Revisions(ctx(t), "no-such-document", oplog.DefaultBranch)
	require.NoError(t, err)
	require.Empty(t, empty.Revision)
}

func testHeads(t *testing.T, h Harness) {
	s := h.NewStore(t)
	g := stream(oplog.ScopeGlobal)
	d := oplog.StreamKey{DocumentID: g.DocumentID, Scope: oplog.ScopeDocument, Branch: g.Branch}
	l := oplog.StreamKey{DocumentID: g.DocumentID, Scope: "local", Branch: g.Branch}
	gb := oplog.StreamKey{DocumentID: g.DocumentID, Scope: oplog.ScopeGlobal, Branch: "draft"}
	other := stream(oplog.ScopeGlobal)
	require.NoError(t, appendOne(t, s, request(d, 0, 2)).Err)
	require.NoError(t, appendOne(t, s, request(g, 0, 5)).Err)
	require.NoError(t, appendOne(t, s, request(g, 5, 3)).Err)
	require.NoError(t, appendOne(t, s, request(l, 0, 1)).Err)
	require.NoError(t, appendOne(t, s, request(gb, 0, 4)).Err)
	require.NoError(t, appendOne(t, s, request(other, 0, 7)).Err)

	heads, err := s.Heads(ctx(t), []string{g.DocumentID, other.DocumentID, "no-such-document"})
	require.NoError(t, err)
	require.Equal(t, map[oplog.StreamKey]int64{d: 2, g: 8, l: 1, gb: 4, other: 7}, heads,
		"every scope on every branch, none for a document without operations")

	only, err := s.Heads(ctx(t), []string{other.DocumentID})
	require.NoError(t, err)
	require.Equal(t, map[oplog.StreamKey]int64{other: 7}, only)

	none, err := s.Heads(ctx(t), nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

func testListDocuments(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ids := []string{"b", "a", "A", "\u00e9", "e\u0301", "z", "\u20ac", "\U0001F600", "a-2", "ab"}
	for _, id := range ids {
		k := oplog.StreamKey{DocumentID: id, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
		require.NoError(t, appendOne(t, s, request(k, 0, 1)).Err)
	}
	want := append([]string{}, ids...)
	sort.Strings(want) // byte order of UTF-8 is code-point order

	var got []string
	cursor := ""
	for {
		page, err := s.ListDocuments(ctx(t), cursor, 3)
		require.NoError(t, err)
		got = append(got, page.DocumentIDs...)
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	require.Equal(t, want, got)
	require.Contains(t, got, "\u00e9", "NFC é")
	require.Contains(t, got, "e\u0301", "NFD é is another document")

	// Any string is a cursor, even one that is no document id.
	for _, c := range []string{"a-1", "e", "\u00e8", "\uffff", "zz"} {
		page, err := s.ListDocuments(ctx(t), c, 100)
		require.NoError(t, err)
		var after []string
		for _, id := range want {
			if id > c {
				after = append(after, id)
			}
		}
		require.Equal(t, after, page.DocumentIDs, "cursor %q", c)
	}
}

func testKeyframes(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	_, ok, err := s.NearestKeyframe(ctx(t), k, 100)
	require.NoError(t, err)
	require.False(t, ok)
	for _, idx := range []int64{9, 19, 29} {
		require.NoError(t, s.PutKeyframe(ctx(t), oplog.Keyframe{
			Stream: k, DocumentType: "test/doc", Index: idx, Version: 1,
			State: json.RawMessage(fmt.Sprintf(`{"at":%d}`, idx/10)), Hash: "h",
		}))
	}
	kf, ok, err := s.NearestKeyframe(ctx(t), k, 25)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(19), kf.Index)
	require.JSONEq(t, `{"at":1}`, string(kf.State))
	kf, ok, err = s.NearestKeyframe(ctx(t), k, 9)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(9), kf.Index, "at or below includes the index itself")
	_, ok, err = s.NearestKeyframe(ctx(t), k, 8)
	require.NoError(t, err)
	require.False(t, ok)

	// Put replaces the keyframe at the same index.
	require.NoError(t, s.PutKeyframe(ctx(t), oplog.Keyframe{Stream: k, Index: 19, Version: 2, State: json.RawMessage(`{"at":"new"}`), Hash: "h2", DocumentType: "test/doc"}))
	all, err := s.ListKeyframes(ctx(t), k)
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, "h2", all[1].Hash)
	require.Equal(t, 2, all[1].Version)

	n, err := s.DeleteKeyframes(ctx(t), k)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	all, err = s.ListKeyframes(ctx(t), k)
	require.NoError(t, err)
	require.Empty(t, all)
}

func testKeyframeInRequest(t *testing.T, h Harness) {
	s := h.NewStore(t)
	k := stream(oplog.ScopeGlobal)
	req := request(k, 0, 10)
	req.Keyframes = []oplog.Keyframe{{Stream: k, Index: 9, Version: 1, State: json.RawMessage(`{"n":9}`), Hash: "hash-9"}}
	require.NoError(t, appendOne(t, s, req).Err)
	kf, ok, err := s.NearestKeyframe(ctx(t), k, 100)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(9), kf.Index)
	require.Equal(t, "test/doc", kf.DocumentType, "the request's document type fills the keyframe's")

	// A refused request writes no keyframe.
	stale := request(k, 3, 1)
	stale.Keyframes = []oplog.Keyframe{{Stream: k, Index: 3, Version: 1, State: json.RawMessage(`{}`), Hash: "x"}}
	require.Error(t, appendOne(t, s, stale).Err)
	all, err := s.ListKeyframes(ctx(t), k)
	require.NoError(t, err)
	require.Len(t, all, 1)
}

func testTailEndAndCursorBefore(t *testing.T, h Harness) {
	s := h.NewStore(t)
	end, err := s.TailEnd(ctx(t))
	require.NoError(t, err)
	require.Zero(t, end.Last, "an empty log has no last row")
	require.NotZero(t, end.Horizon)

	var txs []uint64
	byTx := map[uint64][]string{}
	for range 3 {
		res := appendOne(t, s, request(stream(oplog.ScopeGlobal), 0, 4))
		require.NoError(t, res.Err)
		tx := res.Operations[0].TxID
		txs = append(txs, tx)
		for _, op := range res.Operations {
			require.Equal(t, tx, op.TxID, "one request, one transaction")
			byTx[tx] = append(byTx[tx], op.OpID)
		}
	}
	// Another test's open transaction holds the horizon back for a while.
	require.Eventually(t, func() bool {
		end, err = s.TailEnd(ctx(t))
		require.NoError(t, err)
		require.LessOrEqual(t, end.Last, txs[2])
		return end.Last == txs[2]
	}, 30*time.Second, 10*time.Millisecond, "the last row below the horizon becomes the last append's")
	require.Greater(t, end.Horizon, end.Last)

	page, err := s.Tail(ctx(t), s.CursorBefore(end.Horizon), 100)
	require.NoError(t, err)
	require.Empty(t, page.Operations, "nothing below the horizon is still to come")

	for i, tx := range txs {
		page, err := s.Tail(ctx(t), s.CursorBefore(tx), 100)
		require.NoError(t, err)
		var got []string
		for _, op := range page.Operations {
			got = append(got, op.OpID)
		}
		var want []string
		for _, later := range txs[i:] {
			want = append(want, byTx[later]...)
		}
		require.Equal(t, want, got, "the tail from before transaction %d returns it whole, then the later ones", i)
	}
	page, err = s.Tail(ctx(t), s.CursorBefore(txs[0]+1), 100)
	require.NoError(t, err)
	require.NotEmpty(t, page.Operations)
	require.Equal(t, byTx[txs[1]][0], page.Operations[0].OpID, "the cursor before a transaction without rows continues with the next one")
}

func testTailEndWaitsForOpenTransaction(t *testing.T, h Harness) {
	s := h.NewStore(t)
	slow := ops(stream(oplog.ScopeGlobal), newJobID(), 0, 1)[0]
	commit := h.HoldTransaction(t, s, slow)
	res := appendOne(t, s, request(stream(oplog.ScopeGlobal), 0, 2))
	require.NoError(t, res.Err)

	end, err := s.TailEnd(ctx(t))
	require.NoError(t, err)
	require.Less(t, end.Last, res.Operations[0].TxID, "the end does not pass a row committed after an open transaction")
	require.LessOrEqual(t, end.Horizon, res.Operations[0].TxID)
	commit()

	want := map[string]bool{slow.OpID: true}
	for _, op := range res.Operations {
		want[op.OpID] = true
	}
	seen, _ := tailUntil(t, s, s.CursorBefore(end.Horizon), want)
	require.Equal(t, slow.OpID, seen[0].OpID, "paging from the horizon read while the slow transaction was open skips nothing")
	require.Len(t, seen, 3)
}
