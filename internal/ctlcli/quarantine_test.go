package ctlcli

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/record"
)

// TestQuarantineListAndLift: against the executor and the Postgres
// projectors as doclog serve runs them, a corrupted document-view head
// quarantines the stream at the next job and the jobs after it wait; `docs
// quarantine list` shows it, `lift` replays the stream from the log and the
// view equals the log again (docs validate compares them); a stream whose
// log itself fails verification is refused with exit 3 and stays
// quarantined.
func TestQuarantineListAndLift(t *testing.T) {
	t.Parallel()
	p := startPipeline(t)
	ctx := context.Background()
	seq := 0
	job := func(kind record.Kind, patch string) {
		t.Helper()
		seq++
		j := &record.Job{JobID: fmt.Sprintf("0193a000-0000-7000-8000-0000000003%02d", seq), Kind: kind, DocumentID: "doc-q", DocumentType: "doclog/json",
			Actions: []oplog.Action{{ID: fmt.Sprintf("a%d", seq), Type: "MERGE_PATCH", Scope: oplog.ScopeGlobal, Input: json.RawMessage(patch)}}}
		p.submit(t, j)
		require.Equal(t, oplog.JobWriteReady, p.await(t, j.JobID).Status)
	}
	viewIndex := func() int64 {
		var i int64
		err := p.store.Pool().QueryRow(ctx, `SELECT coalesce(max(last_index), -1) FROM document_snapshots WHERE document_id = 'doc-q' AND scope = 'global'`).Scan(&i)
		require.NoError(t, err)
		return i
	}
	corruptHead := func() {
		t.Helper()
		tag, err := p.store.Pool().Exec(ctx, `UPDATE projector_streams SET state = '{"corrupted":true}', hash = 'corrupted'
WHERE projector = 'docview' AND document_id = 'doc-q' AND scope = 'global'`)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
	}
	list := func() []struct {
		Projector, DocumentID, Scope, Branch, ErrorName string
		Index                                           int64
		Since                                           time.Time
	} {
		t.Helper()
		code, out, errOut := ctl(t, append([]string{"docs", "quarantine", "list", "-o", "json"}, p.args...)...)
		require.Equal(t, exitOK, code, errOut)
		var rows []struct {
			Projector, DocumentID, Scope, Branch, ErrorName string
			Index                                           int64
			Since                                           time.Time
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rows))
		return rows
	}

	job(record.KindCreate, `{"n":0}`)
	require.Eventually(t, func() bool { return viewIndex() == 0 }, time.Minute, 50*time.Millisecond)
	require.Empty(t, list())
	code, _, errOut := ctl(t, append([]string{"docs", "quarantine", "lift", "doc-q"}, p.args...)...)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "document doc-q has no quarantined stream on branch main")
	code, _, errOut = ctl(t, append([]string{"docs", "quarantine", "list", "--projector", "nope"}, p.args...)...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--projector takes docview, indexer, analytics")

	corruptHead()
	job(record.KindMutate, `{"n":1}`)
	job(record.KindMutate, `{"n":2}`)
	require.Eventually(t, func() bool { return len(list()) == 1 }, time.Minute, 50*time.Millisecond)
	q := list()[0]
	require.Equal(t, "docview", q.Projector)
	require.Equal(t, "doc-q", q.DocumentID)
	require.Equal(t, oplog.ScopeGlobal, q.Scope)
	require.Equal(t, oplog.DefaultBranch, q.Branch)
	require.EqualValues(t, 1, q.Index)
	require.Equal(t, "HashMismatch", q.ErrorName)
	require.WithinDuration(t, time.Now(), q.Since, time.Minute)
	code, out, _ := ctl(t, append([]string{"docs", "quarantine", "list"}, p.args...)...)
	require.Equal(t, exitOK, code)
	require.Regexp(t, `docview\s*│?\s*doc-q\s*│?\s*global\s*│?\s*main`, out)
	require.EqualValues(t, 0, viewIndex(), "the quarantined stream waits")

	code, out, errOut = ctl(t, append([]string{"docs", "quarantine", "lift", "doc-q", "--scope", "global", "-o", "json"}, p.args...)...)
	require.Equal(t, exitOK, code, errOut)
	var lifted []struct {
		Projector string
		Lifted    bool
		Replayed  int
		LastIndex int64
	}
	require.NoError(t, json.Unmarshal([]byte(out), &lifted))
	require.Len(t, lifted, 1)
	require.Equal(t, "docview", lifted[0].Projector)
	require.True(t, lifted[0].Lifted)
	require.Equal(t, 3, lifted[0].Replayed)
	require.EqualValues(t, 2, lifted[0].LastIndex)
	require.Empty(t, list())
	require.EqualValues(t, 2, viewIndex(), "what waited is applied by the lift")
	code, out, errOut = ctl(t, append([]string{"docs", "validate", "doc-q"}, p.args...)...)
	require.Equal(t, exitOK, code, "the view equals the log: %s%s", out, errOut)
	job(record.KindMutate, `{"n":3}`)
	require.Eventually(t, func() bool { return viewIndex() == 3 }, time.Minute, 50*time.Millisecond, "the stream moves again")

	// The log itself stops verifying at index 1: a lift is refused.
	_, err := p.store.Pool().Exec(ctx, `UPDATE operations SET hash = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='
WHERE document_id = 'doc-q' AND scope = 'global' AND idx = 1`)
	require.NoError(t, err)
	corruptHead()
	job(record.KindMutate, `{"n":4}`)
	require.Eventually(t, func() bool { return len(list()) == 1 }, time.Minute, 50*time.Millisecond)
	code, out, errOut = ctl(t, append([]string{"docs", "quarantine", "lift", "doc-q", "--projector", "docview"}, p.args...)...)
	require.Equal(t, exitProblems, code, errOut)
	require.Contains(t, out, "refused: the log still fails at index 1: HashMismatch")
	require.Len(t, list(), 1, "a refused lift keeps the quarantine")
	require.EqualValues(t, 4, list()[0].Index)
	require.EqualValues(t, 3, viewIndex())
}

// TestQuarantineLiftAnalytics: lifting an analytics quarantine writes the
// replayed stream to ClickHouse, so it needs --clickhouse-url (exit 2
// without); with it the stream's operations reach the analytics tables.
// The quarantine row is written directly: no analytics runner runs here,
// and Lift does not depend on how the quarantine came about.
func TestQuarantineLiftAnalytics(t *testing.T) {
	t.Parallel()
	p := startPipeline(t)
	ctx := context.Background()
	for i, kind := range []record.Kind{record.KindCreate, record.KindMutate} {
		j := &record.Job{JobID: fmt.Sprintf("0193a000-0000-7000-8000-0000000004%02d", i), Kind: kind, DocumentID: "doc-a", DocumentType: "doclog/json",
			Actions: []oplog.Action{{ID: fmt.Sprintf("a%d", i), Type: "MERGE_PATCH", Scope: oplog.ScopeGlobal, Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}}}
		p.submit(t, j)
		require.Equal(t, oplog.JobWriteReady, p.await(t, j.JobID).Status)
	}
	_, err := p.store.Pool().Exec(ctx, `INSERT INTO quarantined_streams (projector, document_id, scope, branch, idx, error_name, reason)
VALUES ('analytics', 'doc-a', 'global', 'main', 1, 'HashMismatch', 'planted by the test')`)
	require.NoError(t, err)

	code, _, errOut := ctl(t, append([]string{"docs", "quarantine", "lift", "doc-a"}, p.args...)...)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "lifting an analytics quarantine writes to ClickHouse: set --clickhouse-url")

	addr, db := testenv.ClickHouseDatabase(t)
	url := "clickhouse://" + addr + "/" + db
	code, out, errOut := ctl(t, append([]string{"docs", "quarantine", "lift", "doc-a", "--projector", "analytics", "--clickhouse-url", url}, p.args...)...)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "lifted: 2 operation(s) replayed and verified, now at index 1")
	code, out, _ = ctl(t, append([]string{"docs", "quarantine", "list", "-o", "json"}, p.args...)...)
	require.Equal(t, exitOK, code)
	require.JSONEq(t, `[]`, out)

	cfg, err := analytics.ParseURL(url)
	require.NoError(t, err)
	r, err := analytics.NewReader(ctx, cfg)
	require.NoError(t, err)
	defer r.Close()
	counts, err := r.OperationCounts(ctx, oplog.DefaultBranch)
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"doc-a": 2}, counts)
}
