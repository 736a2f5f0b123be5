package ctlcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/record"
)

// TestVerifyCommand runs doclogctl verify over a pipeline of the executor
// and all three projectors: clean once settled (exit 0), exit 3 with a
// finding of the right kind once a projection is damaged, resumable with
// --from; and docs validate compares the document view and only notes
// timestamps that run backwards.
func TestVerifyCommand(t *testing.T) {
	t.Parallel()
	chAddr, chDB := testenv.ClickHouseDatabase(t)
	chURL := "clickhouse://" + chAddr + "/" + chDB
	p := startPipeline(t, func(s *app.Settings) {
		s.Projectors = append(s.Projectors, "analytics")
		s.ClickHouseURL = chURL
	})
	const ts = 1_800_000_000_000
	for i, doc := range []string{"doc-1", "doc-2", "doc-3"} {
		job := &record.Job{JobID: fmt.Sprintf("0193a000-0000-7000-8000-0000000002%02d", i), Kind: record.KindCreate,
			DocumentID: doc, DocumentType: "doclog/json",
			Actions: []oplog.Action{
				{ID: "a", Type: "MERGE_PATCH", Scope: oplog.ScopeGlobal, TimestampUtcMs: ts, Input: json.RawMessage(`{"n":1}`)},
				// Stamped before the previous action, as a concurrent
				// client's clock may: a note, never a failure.
				{ID: "b", Type: "MERGE_PATCH", Scope: oplog.ScopeGlobal, TimestampUtcMs: ts - 5000, Input: json.RawMessage(`{"n":2}`)},
			}}
		p.submit(t, job)
		require.Equal(t, oplog.JobWriteReady, p.await(t, job.JobID).Status)
	}
	args := append([]string{"--clickhouse-url", chURL}, p.args...)
	verify := func(extra ...string) (int, *admin.VerifyReport, string) {
		t.Helper()
		code, out, errOut := ctl(t, append(append([]string{"verify", "-o", "json", "--interval", "100ms"}, extra...), args...)...)
		var rep admin.VerifyReport
		require.NoError(t, json.Unmarshal([]byte(out), &rep), "stdout %q, stderr %q", out, errOut)
		return code, &rep, errOut
	}

	code, rep, errOut := verify("--wait", "2m")
	require.Equal(t, exitOK, code, "findings: %+v; %s", rep.Findings, errOut)
	require.True(t, rep.Clean)
	require.Equal(t, 3, rep.Documents)
	require.Equal(t, 6, rep.Streams, "document and global scope of each")
	require.Equal(t, int64(9), rep.Operations)
	require.Equal(t, []string{"log", "jobs", "docview", "indexer", "analytics"}, rep.Checked)
	require.Len(t, rep.Notes, 3, "one backwards timestamp per document")

	code, out, _ := ctl(t, append([]string{"verify"}, args...)...)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "3 document(s), 6 stream(s), 9 operation(s), 3 job(s)")
	require.Contains(t, out, "clean, 3 note(s)")
	require.Contains(t, out, "note: timestamp-order")

	code, out, errOut = ctl(t, append([]string{"docs", "validate", "doc-1"}, p.args...)...)
	require.Equal(t, exitOK, code, "a healthy document with backwards timestamps: %s %s", out, errOut)
	require.Contains(t, out, "consistent, 1 note(s)")

	code, rep, errOut = verify("--from", "doc-1", "--progress")
	require.Equal(t, exitOK, code)
	require.Equal(t, 2, rep.Documents, "doc-2 and doc-3")
	require.Contains(t, errOut, `--from "doc-3"`, "the bar shows the cursor to resume from")

	// Damage two projections.
	_, err := p.store.Pool().Exec(context.Background(), `DELETE FROM documents WHERE document_id = 'doc-2'`)
	require.NoError(t, err)
	_, err = p.store.Pool().Exec(context.Background(), `UPDATE document_snapshots SET last_hash = 'forged' WHERE document_id = 'doc-1' AND scope = 'global'`)
	require.NoError(t, err)

	code, rep, _ = verify("--wait", "300ms")
	require.Equal(t, exitProblems, code)
	require.False(t, rep.Clean)
	require.Len(t, rep.Findings, 2, "%+v", rep.Findings)
	require.Equal(t, admin.FindingDocview, rep.Findings[0].Kind)
	require.Equal(t, "doc-1", rep.Findings[0].DocumentID)
	require.Contains(t, rep.Findings[0].Message, "forged")
	require.Equal(t, admin.FindingIndexer, rep.Findings[1].Kind)
	require.Equal(t, "doc-2", rep.Findings[1].DocumentID)
	require.Greater(t, rep.Attempts, 1, "the findings persisted over the wait")

	code, out, _ = ctl(t, append([]string{"docs", "validate", "doc-1"}, p.args...)...)
	require.Equal(t, exitProblems, code, "docs validate compares the document view")
	require.Contains(t, out, "forged")
	code, _, _ = ctl(t, append([]string{"docs", "validate", "doc-1", "--docview=false"}, p.args...)...)
	require.Equal(t, exitOK, code)

	code, _, errOut = ctl(t, append([]string{"verify", "--projectors", "bogus"}, p.args...)...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--projectors")

	// Damage the analytics tables too (an operation the log never held),
	// then rebuild all three projections while the pipeline runs: verify
	// is clean again.
	chCfg, err := analytics.ParseURL(chURL)
	require.NoError(t, err)
	reader, err := analytics.NewReader(context.Background(), chCfg)
	require.NoError(t, err)
	defer reader.Close()
	b, err := reader.Conn().PrepareBatch(context.Background(), "INSERT INTO "+chDB+".operations (document_id, scope, branch, idx, op_id, ordinal)")
	require.NoError(t, err)
	require.NoError(t, b.Append("doc-3", oplog.ScopeGlobal, oplog.DefaultBranch, int64(99), "forged-op", uint64(1)))
	require.NoError(t, b.Send())
	code, rep, _ = verify("--wait", "300ms")
	require.Equal(t, exitProblems, code)
	require.Len(t, rep.Findings, 3, "%+v", rep.Findings)
	require.Equal(t, admin.FindingAnalytics, rep.Findings[2].Kind)
	require.Equal(t, "doc-3", rep.Findings[2].DocumentID)

	code, _, errOut = ctl(t, append([]string{"projector", "rebuild", "analytics"}, p.args...)...)
	require.Equal(t, exitUsage, code, "rebuilding analytics needs ClickHouse: %s", errOut)
	require.Contains(t, errOut, "--clickhouse-url")
	for _, name := range []string{"docview", "indexer", "analytics"} {
		code, out, errOut := ctl(t, append([]string{"projector", "rebuild", name, "-o", "json"}, args...)...)
		require.Equal(t, exitOK, code, "rebuild %s: %s", name, errOut)
		var rebuilt struct{ Built struct{ Documents int } }
		require.NoError(t, json.Unmarshal([]byte(out), &rebuilt))
		require.Equal(t, 3, rebuilt.Built.Documents, "rebuild %s", name)
	}
	code, rep, errOut = verify("--wait", "2m")
	require.Equal(t, exitOK, code, "findings after the rebuilds: %+v; %s", rep.Findings, errOut)
	require.True(t, rep.Clean)
	// The operator's guide's rebuild examples, on the same stack.
	runExamples(t, "../../docs/operating.md", "## Rebuilding a projection", args)
}

// TestVerifyReportsIncompleteRun: a run that stopped early says where to
// resume and exits 1, or 3 when it found something already.
func TestVerifyReportsIncompleteRun(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	g := &globals{output: "table", out: &out, errOut: &errOut}
	rep := &admin.VerifyReport{Documents: 4, Next: "doc-0003", Findings: []admin.Finding{}, Checked: []string{"log", "jobs"}}
	err := g.reportVerify(rep)
	require.ErrorContains(t, err, "verification incomplete after 4 document(s)")
	require.NotErrorIs(t, err, errProblemsFound)
	require.Contains(t, errOut.String(), `resume with --from "doc-0003"`)
	require.Contains(t, out.String(), "nothing found so far")

	errOut.Reset()
	rep.Findings = []admin.Finding{{Kind: admin.FindingGap, DocumentID: "doc-0001", Index: 3, Message: "index 3 is missing"}}
	require.ErrorIs(t, g.reportVerify(rep), errProblemsFound)
	require.Contains(t, errOut.String(), `resume with --from "doc-0003"`)
}
