package ctlcli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/record"
)

// executorRole runs the executor as doclog serve --roles=executor runs it,
// on the test's topics and schema, until the returned stop is called.
func executorRole(t *testing.T, env *testenv.KafkaEnv, url string) (stop func()) {
	t.Helper()
	s := &app.Settings{
		Roles:            []string{app.RoleExecutor},
		OpsAddr:          "127.0.0.1:0",
		DatabaseURL:      url,
		DatabaseMaxConns: 8,
		Migrate:          "auto",
		Kafka:            env.Config,
		Topics:           env.Topics,
		CreateTopics:     true,
	}
	require.NoError(t, s.Validate())
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, s, zap.NewNop())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, nil) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop
}

// jobControl is a test's schema and topics, the flags that point doclogctl
// at them, and the executor role on them, started.
type jobControl struct {
	env   *testenv.KafkaEnv
	url   string
	args  []string
	store *postgres.Store
	stop  func() // stops the executor started by setup
	cl    *kgo.Client
}

func setupJobControl(t *testing.T) *jobControl {
	t.Helper()
	jc := &jobControl{env: testenv.Kafka(t), url: testenv.PostgresSchema(t)}
	jc.args = []string{"--database-url", jc.url, "--kafka-seeds", strings.Join(jc.env.Config.Seeds, ","), "--topics-prefix", jc.env.Topics.Prefix}
	jc.stop = executorRole(t, jc.env, jc.url)
	store, err := postgres.Open(context.Background(), jc.url)
	require.NoError(t, err)
	t.Cleanup(store.Close)
	jc.store, jc.cl = store, jc.env.Client()
	return jc
}

func (jc *jobControl) submit(t *testing.T, job *record.Job) {
	t.Helper()
	rec, err := record.NewJobRecord(jc.env.Names.Jobs, job)
	require.NoError(t, err)
	require.NoError(t, jc.cl.ProduceSync(context.Background(), rec).FirstErr())
}

func awaitResult(t *testing.T, store *postgres.Store, jobID string) oplog.JobResult {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// Until the role has migrated the schema, the lookup fails.
		found, err := store.JobResults(context.Background(), []string{jobID})
		if r, ok := found[jobID]; err == nil && ok {
			return r
		}
		require.True(t, time.Now().Before(deadline), "job %s has no result (last lookup error: %v)", jobID, err)
		time.Sleep(50 * time.Millisecond)
	}
}

func patchJob(id, doc, key string, hint ...string) *record.Job {
	return &record.Job{JobID: id, Kind: record.KindMutate, DocumentID: doc, DocumentType: "doclog/json", QueueHint: hint,
		Actions: []oplog.Action{{ID: "a-" + key, Type: "MERGE_PATCH", Scope: oplog.ScopeGlobal, Input: json.RawMessage(`{"` + key + `":true}`)}}}
}

// TestJobsListAndCancel: with the executor stopped, jobs list shows the
// queued jobs (a dependency wait and the job behind it included) and jobs
// cancel settles one FAILED/Cancelled; an applied job, a cancelled one and
// an unknown one refuse. Started again, the executor applies nothing of the
// cancelled job, fails its dependent, applies the rest, and dead-letters the
// cancelled job as CANCELLED.
func TestJobsListAndCancel(t *testing.T) {
	t.Parallel()
	jc := setupJobControl(t)
	env, url, store, ctx := jc.env, jc.url, jc.store, context.Background()
	jobsCtl := func(sub ...string) (int, string, string) {
		return ctl(t, append(append([]string{"jobs"}, sub...), jc.args...)...)
	}
	submit := func(job *record.Job) { jc.submit(t, job) }
	const doc = "doc-cancel"
	create := &record.Job{JobID: "0193a000-0000-7000-8000-00000000c001", Kind: record.KindCreate, DocumentID: doc, DocumentType: "doclog/json"}
	submit(create)
	require.Equal(t, oplog.JobWriteReady, awaitResult(t, store, create.JobID).Status)
	jc.stop()

	// The executor is down: these three wait on the topic.
	doomed := patchJob("0193a000-0000-7000-8000-00000000c002", doc, "cancelled")
	dependent := patchJob("0193a000-0000-7000-8000-00000000c003", doc, "dependent", doomed.JobID)
	kept := patchJob("0193a000-0000-7000-8000-00000000c004", doc, "kept")
	for _, j := range []*record.Job{doomed, dependent, kept} {
		submit(j)
	}

	list := func(sub ...string) []admin.QueuedJob {
		t.Helper()
		code, out, errOut := jobsCtl(append([]string{"list", "-o", "json"}, sub...)...)
		require.Equal(t, exitOK, code, errOut)
		var jobs []admin.QueuedJob
		require.NoError(t, json.Unmarshal([]byte(out), &jobs), out)
		return jobs
	}
	queued := list()
	require.Len(t, queued, 3, "the create has a result, the three others wait")
	for i, j := range []*record.Job{doomed, dependent, kept} {
		require.Equal(t, j.JobID, queued[i].JobID)
		require.Equal(t, doc, queued[i].DocumentID)
		require.Equal(t, queued[0].Partition, queued[i].Partition, "a document's jobs share a partition")
		require.Greater(t, queued[i].AgeSeconds, -1.0)
	}
	require.Less(t, queued[0].Offset, queued[1].Offset)
	require.Less(t, queued[1].Offset, queued[2].Offset)
	require.Empty(t, queued[0].WaitsFor)
	require.Equal(t, []string{doomed.JobID}, queued[1].WaitsFor, "parked on its queueHint")
	require.Equal(t, dependent.JobID, queued[2].Behind, "a document's jobs never overtake each other")

	parked := list("--parked")
	require.Len(t, parked, 2)
	require.Equal(t, dependent.JobID, parked[0].JobID)
	require.Equal(t, kept.JobID, parked[1].JobID)
	require.Empty(t, list("--document", "another-doc"))
	part := queued[0].Partition
	require.Len(t, list("--partition", strconv.Itoa(int(part))), 3)
	require.Empty(t, list("--partition", strconv.Itoa(int((part+1)%env.Topics.JobsPartitions))))

	code, out, errOut := jobsCtl("list")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "behind "+dependent.JobID)

	// The examples of docs/operating.md and docs/cli.md: listing, and
	// cancelling the first job (and another document's, submitted now).
	extra := patchJob("0193a000-0000-7000-8000-00000000c005", "doc-other", "extra")
	submit(extra)
	runExamples(t, "../../docs/operating.md", "## Job control", jc.args)
	runExamples(t, "../../docs/cli.md", "## Job control", jc.args)

	// A second cancel, the applied create and an unknown job refuse with
	// exit 1, a malformed id with exit 2.
	code, out, errOut = jobsCtl("cancel", doomed.JobID, "-o", "json")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "cannot be cancelled: it is already FAILED")
	var outcome admin.CancelOutcome
	require.NoError(t, json.Unmarshal([]byte(out), &outcome))
	require.False(t, outcome.Cancelled)
	require.Equal(t, oplog.JobFailed, outcome.Result.Status)
	require.Equal(t, doc, outcome.Result.DocumentID)
	require.Len(t, outcome.Result.ErrorHistory, 1)
	require.Equal(t, executor.NameCancelled, outcome.Result.ErrorHistory[0].Name)
	require.Equal(t, "cancelled by an operator: wrong amount", outcome.Result.ErrorHistory[0].Message)

	code, out, errOut = jobsCtl("cancel", extra.JobID)
	require.Equal(t, exitFailed, code)
	require.Contains(t, out, "Cancelled: cancelled by an operator: duplicate order")

	code, out, errOut = jobsCtl("cancel", create.JobID)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "job "+create.JobID+" cannot be cancelled: it is already WRITE_READY")
	require.Contains(t, out, "WRITE_READY")

	code, _, errOut = jobsCtl("cancel", "0193a000-0000-7000-8000-00000000c0ff")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "no such job is queued")

	code, _, errOut = jobsCtl("cancel", "not-a-job")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "is not a job id")

	// The cancelled job is settled: it leaves the list, and its dependent
	// no longer waits (it will fail).
	queued = list()
	require.Len(t, queued, 2)
	require.Equal(t, dependent.JobID, queued[0].JobID)
	require.Empty(t, queued[0].WaitsFor)
	require.Empty(t, queued[1].Behind)

	// The executor comes back.
	executorRole(t, env, url)
	got := awaitResult(t, store, kept.JobID)
	require.Equal(t, oplog.JobWriteReady, got.Status)
	got = awaitResult(t, store, dependent.JobID)
	require.Equal(t, oplog.JobFailed, got.Status)
	require.Equal(t, executor.NameDependencyFailed, got.ErrorHistory[len(got.ErrorHistory)-1].Name)
	found, err := store.JobResults(ctx, []string{doomed.JobID, extra.JobID})
	require.NoError(t, err)
	require.Equal(t, outcome.Result.ErrorHistory, found[doomed.JobID].ErrorHistory, "the cancel's result stands")
	require.Equal(t, executor.NameCancelled, found[extra.JobID].ErrorHistory[0].Name)
	revs, err := store.Revisions(ctx, extra.DocumentID, oplog.DefaultBranch)
	require.NoError(t, err)
	require.Empty(t, revs.Revision, "nothing of the other cancelled job was written")

	// Nothing of the cancelled (or the dependent) job was applied: the
	// global stream holds the kept job's operation alone.
	ops, err := store.ReadStream(ctx, oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}, 0, 0)
	require.NoError(t, err)
	require.Len(t, ops, 1)
	require.Equal(t, kept.JobID, ops[0].JobID)

	// The cancelled job is announced as a dead letter, classified CANCELLED.
	require.Eventually(t, func() bool {
		entries, err := admin.ListDeadLetters(ctx, env.Config, env.Names.DeadLetters)
		if err != nil {
			return false
		}
		types := map[string]record.ErrorType{}
		for _, e := range entries {
			if e.DeadLetter != nil && e.DeadLetter.Job != nil {
				types[e.DeadLetter.Job.JobID] = e.DeadLetter.ErrorType
			}
		}
		return types[doomed.JobID] == record.ErrCancelled && types[extra.JobID] == record.ErrCancelled &&
			types[dependent.JobID] == record.ErrDependencyFailed
	}, time.Minute, 100*time.Millisecond)

	// Once the executor commits past them, nothing is queued.
	require.Eventually(t, func() bool {
		code, out, _ := jobsCtl("list", "-o", "json")
		return code == exitOK && strings.TrimSpace(out) == "[]"
	}, time.Minute, 200*time.Millisecond)
}

// TestCancelRacesTheExecutor: cancels issued while the executor runs settle
// every job exactly once. A job the cancel won has a FAILED/Cancelled result
// and no operation; a job the executor won is WRITE_READY with its
// operations, and the cancel reported that status instead.
func TestCancelRacesTheExecutor(t *testing.T) {
	t.Parallel()
	jc := setupJobControl(t)
	store, ctx := jc.store, context.Background()

	// A warm-up job, so the topics exist and the member has joined.
	warm := &record.Job{JobID: "0193a000-0000-7000-8000-00000000d000", Kind: record.KindCreate, DocumentID: "race-warm", DocumentType: "doclog/json"}
	jc.submit(t, warm)
	awaitResult(t, store, warm.JobID)

	const n = 12
	outcomes := make([]admin.CancelOutcome, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		job := &record.Job{JobID: fmt.Sprintf("0193a000-0000-7000-8000-00000000d%03d", i+1), Kind: record.KindCreate,
			DocumentID: fmt.Sprintf("race-%d", i), DocumentType: "doclog/json"}
		jc.submit(t, job)
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out, _ := ctl(t, append([]string{"jobs", "cancel", job.JobID, "-o", "json"}, jc.args...)...)
			codes[i] = code
			_ = json.Unmarshal([]byte(out), &outcomes[i])
		}()
	}
	wg.Wait()
	won := 0
	for i := range n {
		id := fmt.Sprintf("0193a000-0000-7000-8000-00000000d%03d", i+1)
		r := awaitResult(t, store, id)
		ops, err := store.ReadStream(ctx, oplog.StreamKey{DocumentID: fmt.Sprintf("race-%d", i), Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}, 0, 0)
		require.NoError(t, err)
		switch codes[i] {
		case exitOK:
			won++
			require.True(t, outcomes[i].Cancelled)
			require.Equal(t, oplog.JobFailed, r.Status)
			require.Equal(t, executor.NameCancelled, r.ErrorHistory[0].Name)
			require.Empty(t, ops, "a cancelled create writes nothing")
		case exitFailed:
			// The executor settled it first (or, rarely, the cancel
			// scanned before the record was visible and found nothing).
			require.Equal(t, oplog.JobWriteReady, r.Status, "job %s", id)
			require.Len(t, ops, 1)
			require.Equal(t, id, ops[0].JobID)
			if outcomes[i].Result.JobID != "" {
				require.False(t, outcomes[i].Cancelled)
				require.Equal(t, oplog.JobWriteReady, outcomes[i].Result.Status)
			}
		default:
			t.Fatalf("cancel of %s exited %d", id, codes[i])
		}
	}
	t.Logf("cancels won %d of %d races", won, n)
}

// runExamples runs the doclogctl lines of the first sh block after heading
// in a document, against the test's stack (args): a line ending in
// "|| echo ..." must exit 1, a line piped into jq must print JSON, any other
// must exit 0.
func runExamples(t *testing.T, path, heading string, args []string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(raw)
	i := strings.Index(doc, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "%s has no section %q", path, heading)
	_, block, ok := strings.Cut(doc[i:], "```sh\n")
	require.True(t, ok, "%s: no sh block under %q", path, heading)
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	n := 0
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		want := exitOK
		if cmd, _, ok := strings.Cut(line, " || "); ok {
			line, want = cmd, exitFailed
		}
		cmd, pipe, piped := strings.Cut(line, " | ")
		words := shellWords(t, cmd)
		require.Equal(t, "doclogctl", words[0], line)
		code, out, errOut := ctl(t, append(words[1:], args...)...)
		require.Equal(t, want, code, "%s: %s%s", line, out, errOut)
		if piped {
			require.True(t, strings.HasPrefix(pipe, "jq "), line)
			require.True(t, json.Valid([]byte(out)), "%s printed %s", line, out)
		}
		n++
	}
	require.NotZero(t, n, "%s: the sh block under %q is empty", path, heading)
}

// shellWords splits a command line as sh would for the examples' needs:
// words separated by spaces, single or double quotes around a word with
// spaces.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var (
		words []string
		cur   strings.Builder
		quote rune
		inW   bool
	)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inW = r, true
		case r == ' ':
			if inW {
				words = append(words, cur.String())
				cur.Reset()
				inW = false
			}
		default:
			cur.WriteRune(r)
			inW = true
		}
	}
	require.Zero(t, quote, "unbalanced quote in %s", line)
	if inW {
		words = append(words, cur.String())
	}
	return words
}

// TestJobsPauseCommands: jobs pause, pauses and resume keep the executor
// group's pauses in the log's database (the executor's obedience is
// TestPauses in the executor package), and docs/operating.md's pause
// examples run.
func TestJobsPauseCommands(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	jobs := func(sub ...string) (int, string, string) {
		return ctl(t, append(append([]string{"jobs"}, sub...), "--database-url", url)...)
	}
	code, out, errOut := jobs("pause", "--partition", "1", "--reason", "disk full on the reporting replica")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "paused partition:1\n", out)
	code, out, _ = jobs("pause", "--partition", "1")
	require.Equal(t, exitOK, code)
	require.Equal(t, "partition:1 was paused already\n", out)
	code, _, errOut = jobs("pause", "--partition", "1", "--type", "doclog/json")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "exactly one of --partition and --type")
	code, _, _ = jobs("pause")
	require.Equal(t, exitUsage, code)

	runExamples(t, "../../docs/operating.md", "### Pausing a partition or a document type", []string{"--database-url", url})

	code, out, errOut = jobs("pauses", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var ps []postgres.ExecutorPause
	require.NoError(t, json.Unmarshal([]byte(out), &ps))
	require.Len(t, ps, 1, "the examples pause and resume doclog/ledger")
	require.Equal(t, executor.PartitionTarget(1), ps[0].Target)
	require.Equal(t, "disk full on the reporting replica", ps[0].Reason)

	code, out, errOut = jobs("resume", "--partition", "1")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "resumed partition:1\n", out)
	code, _, errOut = jobs("resume", "--partition", "1")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "partition:1 is not paused")
	code, out, _ = jobs("pauses", "-o", "json")
	require.Equal(t, exitOK, code)
	require.JSONEq(t, "[]", out)
}
