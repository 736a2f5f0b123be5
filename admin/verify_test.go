package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/record"
)

// settle is how long a verification waits for the projectors to catch up
// with a workload.
const settle = 2 * time.Minute

type verifyBundle struct {
	env       *projtest.Env
	w         *projtest.Workload
	analytics *analytics.Projector
}

// setupVerify runs the three projectors (docview, indexer, analytics into
// a ClickHouse database of the test's) on the test's schema and topic.
func setupVerify(t *testing.T) verifyBundle {
	t.Helper()
	env := projtest.New(t, docview.Migrations(), indexer.Migrations())
	addr, db := testenv.ClickHouseDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := analytics.New(ctx, analytics.Config{Addr: []string{addr}, Database: db, BatchDelay: 50 * time.Millisecond}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	env.Start(env.Config(docview.Projector{}, "docview"))
	env.Start(env.Config(indexer.Projector{}, "indexer"))
	env.Start(a.RunnerConfig(env.Config(a, "analytics")))
	return verifyBundle{env: env, w: env.NewWorkload(7), analytics: a}
}

func (b verifyBundle) config() admin.VerifyConfig {
	return admin.VerifyConfig{
		Store: postgres.New(b.env.Pool), Registry: b.env.Registry,
		Docview: true, Indexer: true, Analytics: b.analytics,
		PageSize: 3, RetryInterval: 200 * time.Millisecond,
	}
}

func (b verifyBundle) verify(t *testing.T, cfg admin.VerifyConfig) *admin.VerifyReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := admin.Verify(ctx, cfg)
	require.NoError(t, err)
	return rep
}

func (b verifyBundle) exec(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	tag, err := b.env.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err, sql)
	return tag.RowsAffected()
}

// patches creates a doclog/json document and gives it n merge patches, one
// job each; it returns the records in commit order.
func (b verifyBundle) patches(t *testing.T, id string, n int) (*projtest.Doc, []*record.WriteReady) {
	t.Helper()
	d, rec := b.w.Create(id, jsondoc.DocumentType, id+"-slug")
	recs := []*record.WriteReady{rec}
	for i := range n {
		rec, err := b.w.Job(d, b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"n": i}))
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	return d, recs
}

// findingsOf returns the kinds of the findings about a document.
func findingsOf(rep *admin.VerifyReport, id string) []admin.FindingKind {
	var out []admin.FindingKind
	for _, f := range rep.Findings {
		if f.DocumentID == id {
			out = append(out, f.Kind)
		}
	}
	return out
}

// TestVerify plants each kind of damage in a real log and its real
// projections and shows Verify finds it, after showing a healthy log with
// lagging projections verifies clean once they settle.
func TestVerify(t *testing.T) {
	t.Parallel()
	b := setupVerify(t)
	recs := b.w.Random("rnd", 6, 30)
	docs := map[string]*projtest.Doc{}
	for _, id := range []string{"snap", "index", "gap", "hash", "short", "clickhouse", "failed"} {
		d, rs := b.patches(t, id, 3)
		docs[id] = d
		recs = append(recs, rs...)
	}
	// A job of two actions, so that one of its operations can go missing
	// without leaving a gap.
	two, err := b.w.Job(docs["short"], b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"a": 1}),
		b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"b": 2}))
	require.NoError(t, err)
	recs = append(recs, two)
	// Concurrent submits: an action stamped before the previous one.
	late := b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"late": true})
	late.TimestampUtcMs -= 60_000
	rec, err := b.w.Job(docs["snap"], late)
	require.NoError(t, err)
	recs = append(recs, rec)
	// A job that failed: a result and no operation, as the executor writes it.
	failedJob := "0193a000-0000-7000-8000-00000000f001"
	res, err := b.env.Log.Append(context.Background(), []oplog.AppendRequest{{
		DocumentID: "failed", DocumentType: jsondoc.DocumentType,
		Jobs:    []oplog.JobOutcome{{JobID: failedJob, Status: oplog.JobFailed, ErrorHistory: []oplog.ErrorInfo{{Name: "ReducerError", Message: "no"}}}},
		Streams: []oplog.StreamAppend{{Stream: oplog.StreamKey{DocumentID: "failed", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}, ExpectedRevision: 3}},
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	b.env.Publish(recs...)

	// The projectors lag behind the log: settling waits for them.
	cfg := b.config()
	cfg.Wait = settle
	rep := b.verify(t, cfg)
	require.True(t, rep.Complete)
	require.Empty(t, rep.Findings)
	require.True(t, rep.Clean)
	require.Equal(t, 13, rep.Documents)
	require.Equal(t, []string{"log", "jobs", "docview", "indexer", "analytics"}, rep.Checked)
	require.Equal(t, len(recs), rep.Jobs, "every job that wrote operations")
	require.Len(t, rep.Notes, 1)
	require.Equal(t, admin.FindingTimestampOrder, rep.Notes[0].Kind)
	require.Equal(t, "snap", rep.Notes[0].DocumentID)

	// The damage, one kind per document.
	ctx := context.Background()
	require.EqualValues(t, 1, b.exec(t, `UPDATE document_snapshots SET state = '{"forged":true}' WHERE document_id = 'snap' AND scope = 'global'`))
	require.EqualValues(t, 1, b.exec(t, `DELETE FROM documents WHERE document_id = 'index'`))
	require.EqualValues(t, 1, b.exec(t, `DELETE FROM operations WHERE document_id = 'gap' AND scope = 'global' AND idx = 1`))
	require.EqualValues(t, 1, b.exec(t, `UPDATE operations SET hash = 'tampered' WHERE document_id = 'hash' AND scope = 'global' AND idx = 2`))
	require.EqualValues(t, 1, b.exec(t, `DELETE FROM operations WHERE document_id = 'short' AND scope = 'global' AND idx = 4`))
	require.EqualValues(t, 1, b.exec(t, `UPDATE jobs SET status = 'FAILED' WHERE job_id = (
  SELECT job_id FROM operations WHERE document_id = 'failed' AND scope = 'global' AND idx = 0)`))
	require.NoError(t, b.analytics.Conn().Exec(ctx, "ALTER TABLE "+b.analytics.Database()+".operations DELETE WHERE document_id = 'clickhouse' AND scope = 'global' AND idx = 0"))
	require.Eventually(t, func() bool {
		n, err := b.analytics.OperationCounts(ctx, oplog.DefaultBranch)
		require.NoError(t, err)
		return n["clickhouse"] == 3 // the mutation runs in the background
	}, time.Minute, 100*time.Millisecond)
	// A tampered operation the projectors receive: they quarantine its
	// stream.
	qd, rs := b.patches(t, "quarantined", 1)
	rec, err = b.w.JobWith(qd, func(ops []oplog.Operation) { ops[0].Hash = "forged" },
		b.w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"q": 1}))
	require.NoError(t, err)
	b.env.Publish(append(rs, rec)...)
	b.env.Eventually(func() bool {
		qs, err := b.env.Store.Quarantines(ctx, docview.Name)
		require.NoError(t, err)
		return len(qs) == 1
	}, settle, "docview quarantines the tampered stream")

	cfg.Wait = time.Second // long enough to show the findings persist
	rep = b.verify(t, cfg)
	require.True(t, rep.Complete)
	require.False(t, rep.Clean)
	require.Greater(t, rep.Attempts, 1, "projection findings were compared again")
	for _, f := range rep.Findings {
		require.NotEmpty(t, f.Message)
		t.Logf("%s %s %s: %s", f.Kind, f.Projector, f.DocumentID, f.Message)
	}
	require.Equal(t, []admin.FindingKind{admin.FindingDocview}, findingsOf(rep, "snap"))
	require.Equal(t, []admin.FindingKind{admin.FindingIndexer}, findingsOf(rep, "index"))
	require.Contains(t, findingsOf(rep, "gap"), admin.FindingGap)
	require.Contains(t, findingsOf(rep, "gap"), admin.FindingJob, "the job of the removed operation holds none of its range")
	require.Contains(t, findingsOf(rep, "hash"), admin.FindingHash)
	require.Contains(t, findingsOf(rep, "short"), admin.FindingJob, "a WRITE_READY job lost one of its two operations")
	require.NotContains(t, findingsOf(rep, "short"), admin.FindingGap, "the last operation: no gap")
	require.Equal(t, []admin.FindingKind{admin.FindingAnalytics}, findingsOf(rep, "clickhouse"))
	require.Equal(t, []admin.FindingKind{admin.FindingJob}, findingsOf(rep, "failed"))
	require.Contains(t, findingsOf(rep, "quarantined"), admin.FindingHash)
	require.Contains(t, findingsOf(rep, "quarantined"), admin.FindingQuarantine)
	for _, f := range rep.Findings {
		if f.DocumentID == "failed" {
			require.Contains(t, f.Message, "FAILED")
		}
		if f.DocumentID == "snap" {
			require.Contains(t, f.Message, "state")
		}
	}
	for _, id := range []string{"rnd-0000", "rnd-0001", "rnd-0002", "rnd-0003", "rnd-0004", "rnd-0005"} {
		require.Empty(t, findingsOf(rep, id), "untouched documents stay clean")
	}
}

// TestVerifyResumes interrupts a verification and resumes it from the
// cursor it reports: the two runs verify every document once between them.
func TestVerifyResumes(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	recs := env.NewWorkload(3).Random("doc", 9, 20)
	require.NotEmpty(t, recs)
	cfg := admin.VerifyConfig{Store: postgres.New(env.Pool), Registry: env.Registry, PageSize: 2}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []admin.VerifyProgress
	cfg.Progress = func(p admin.VerifyProgress) {
		seen = append(seen, p)
		if p.Documents == 4 {
			cancel()
		}
	}
	rep, err := admin.Verify(ctx, cfg)
	require.NoError(t, err)
	require.False(t, rep.Complete)
	require.False(t, rep.Clean)
	require.Equal(t, 4, rep.Documents)
	require.Equal(t, "doc-0003", rep.Next)
	require.Equal(t, "doc-0003", seen[len(seen)-1].Cursor)

	cfg.Progress, cfg.From = nil, rep.Next
	rest, err := admin.Verify(context.Background(), cfg)
	require.NoError(t, err)
	require.True(t, rest.Complete)
	require.True(t, rest.Clean, "findings: %+v", rest.Findings)
	require.Equal(t, 5, rest.Documents)
	require.Empty(t, rest.Next)
}

// TestVerifyJobOfOtherRange checks a job whose document lies before the
// resumed range through its ranges alone, and finds the operation it lost.
func TestVerifyJobOfOtherRange(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	w := env.NewWorkload(5)
	d, _ := w.Create("a-doc", jsondoc.DocumentType, "")
	_, err := w.Job(d, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"x": 1}),
		w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"y": 2}))
	require.NoError(t, err)
	w.Create("b-doc", jsondoc.DocumentType, "")
	_, err = env.Pool.Exec(context.Background(), `DELETE FROM operations WHERE document_id = 'a-doc' AND scope = 'global' AND idx = 1`)
	require.NoError(t, err)

	rep, err := admin.Verify(context.Background(), admin.VerifyConfig{Store: postgres.New(env.Pool), Registry: env.Registry, From: "a-doc"})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Documents, "b-doc only")
	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	require.Equal(t, admin.FindingJob, f.Kind)
	require.Equal(t, "a-doc", f.DocumentID)
	require.Equal(t, int64(1), f.Index)
	require.Contains(t, f.Message, "1 of those indexes hold no operation")
}

// TestVerifyLoadJobs: a load job's operations keep their origin's op ids,
// and a merge re-appends stored operations under theirs; verify holds them
// to the count the load's result gives, not to ids derived from the job.
// A log holding an append, a reshuffle and a load of replays verifies clean.
func TestVerifyLoadJobs(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	w := env.NewWorkload(6)
	d, _ := w.Create("loaded", jsondoc.DocumentType, "")
	for i := range 2 {
		_, err := w.Job(d, w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"n": i}))
		require.NoError(t, err)
	}
	remote := func(id string, index int64) record.LoadOperation {
		a := w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{id: true})
		return record.LoadOperation{OpID: id, Index: index, Hash: "not checked: a merge re-derives it", Action: a}
	}
	early := remote("origin-early", 1)
	early.Action.TimestampUtcMs = 1  // before both stored operations: both move
	late := remote("origin-late", 2) // after everything: appended, at an index other than the origin's
	for _, load := range [][]record.LoadOperation{{early}, {early, late}, {early, late}} {
		_, err := w.Load(d, load...)
		require.NoError(t, err)
	}
	rep, err := admin.Verify(context.Background(), admin.VerifyConfig{Store: postgres.New(env.Pool), Registry: env.Registry})
	require.NoError(t, err)
	require.True(t, rep.Complete)
	require.Empty(t, rep.Findings)
	require.Equal(t, 6, rep.Jobs, "the create, two jobs and three loads")
	require.Equal(t, int64(1+2+3+1), rep.Operations, "the create, two jobs, the merge (the new one and the two moved), the append")
}

// TestValidateNotesTimestampsAndComparesSnapshots: action timestamps that
// run backwards are a note, and ValidateDocument compares the document
// view's snapshot (state, index) with the replay.
func TestValidateNotesTimestampsAndComparesSnapshots(t *testing.T) {
	t.Parallel()
	env := projtest.New(t, docview.Migrations())
	w := env.NewWorkload(9)
	d, rec := w.Create("doc", jsondoc.DocumentType, "")
	recs := []*record.WriteReady{rec}
	for i := range 3 {
		a := w.Action(oplog.ScopeGlobal, jsondoc.ActionMergePatch, map[string]any{"n": i})
		a.TimestampUtcMs -= int64(i) * 10_000 // each before the previous
		rec, err := w.Job(d, a)
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	env.Publish(recs...)
	env.Start(env.Config(docview.Projector{}, "docview"))
	view := docview.NewView(env.Pool, env.Store)
	env.Eventually(func() bool {
		doc, err := view.Get(context.Background(), "doc", oplog.DefaultBranch)
		return err == nil && doc.Revision[oplog.ScopeGlobal] == 3
	}, settle, "the view reaches the log")

	ctx := context.Background()
	validate := func() admin.ValidationReport {
		rep, err := admin.ValidateDocument(ctx, env.Log, env.Registry, admin.NewViewSnapshots(view), "doc", oplog.DefaultBranch)
		require.NoError(t, err)
		return rep
	}
	rep := validate()
	require.True(t, rep.Consistent, "issues: %+v", rep.Issues)
	require.Len(t, rep.Notes, 2)
	for _, n := range rep.Notes {
		require.Equal(t, admin.IssueTimestampOrder, n.Kind)
	}

	_, err := env.Pool.Exec(ctx, `UPDATE document_snapshots SET state = $1 WHERE document_id = 'doc' AND scope = 'global'`, `{"n":99}`)
	require.NoError(t, err)
	rep = validate()
	require.False(t, rep.Consistent)
	require.Len(t, rep.Issues, 1)
	require.Equal(t, admin.IssueSnapshot, rep.Issues[0].Kind)
	require.Contains(t, rep.Issues[0].Message, "snapshot state hashes to")

	_, err = env.Pool.Exec(ctx, `UPDATE document_snapshots SET last_index = 1 WHERE document_id = 'doc' AND scope = 'global'`)
	require.NoError(t, err)
	rep = validate()
	require.Len(t, rep.Issues, 1)
	require.Equal(t, "the snapshot is at index 1, the log's head at 2", rep.Issues[0].Message)
}
