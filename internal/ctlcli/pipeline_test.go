package ctlcli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/record"
)

// pipeline runs the executor and the Postgres projectors, composed as
// `doclog serve` composes them, against the test's schema and topics.
type pipeline struct {
	url   string
	args  []string // the flags that point doclogctl at it
	store *postgres.Store
	jobs  string // the jobs topic
	cl    *kgo.Client
}

// startPipeline starts it; each option may change the settings first.
func startPipeline(t *testing.T, options ...func(*app.Settings)) *pipeline {
	t.Helper()
	env := testenv.Kafka(t)
	url := testenv.PostgresSchema(t)
	s := &app.Settings{
		Roles:            []string{app.RoleExecutor, app.RoleProjectors},
		Projectors:       []string{"docview", "indexer"},
		OpsAddr:          "127.0.0.1:0",
		DatabaseURL:      url,
		DatabaseMaxConns: 8,
		Migrate:          "auto",
		Kafka:            env.Config,
		Topics:           env.Topics,
		CreateTopics:     true,
	}
	for _, o := range options {
		o(s)
	}
	require.NoError(t, s.Validate())
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, s, zap.NewNop())
	require.NoError(t, err)
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- a.Run(ctx, func() { close(ready) }) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	// Migrations and topics exist once it is ready: a result polled
	// before would find no jobs table.
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the pipeline stopped before it was ready: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the pipeline was not ready within 2 minutes")
	}
	store, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(store.Close)
	return &pipeline{
		url:   url,
		args:  []string{"--database-url", url, "--kafka-seeds", strings.Join(env.Config.Seeds, ","), "--topics-prefix", env.Topics.Prefix},
		store: store,
		jobs:  env.Names.Jobs,
		cl:    env.Client(),
	}
}

func (p *pipeline) submit(t *testing.T, job *record.Job) {
	t.Helper()
	rec, err := record.NewJobRecord(p.jobs, job)
	require.NoError(t, err)
	require.NoError(t, p.cl.ProduceSync(context.Background(), rec).FirstErr())
}

// await waits for a job's result.
func (p *pipeline) await(t *testing.T, jobID string) oplog.JobResult {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		found, err := p.store.JobResults(context.Background(), []string{jobID})
		require.NoError(t, err)
		if r, ok := found[jobID]; ok {
			return r
		}
		require.True(t, time.Now().Before(deadline), "job %s has no result", jobID)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedriveAfterTheCauseIsFixed: a job on a document that does not exist
// yet is dead-lettered; once the document is created, redriving the dead
// letter makes the job succeed as a new job.
func TestRedriveAfterTheCauseIsFixed(t *testing.T) {
	t.Parallel()
	p := startPipeline(t)
	patch := &record.Job{JobID: "0193a000-0000-7000-8000-0000000000e1", Kind: record.KindMutate, DocumentID: "doc-late",
		DocumentType: "doclog/json", Actions: []oplog.Action{{ID: "p1", Type: "MERGE_PATCH", Scope: oplog.ScopeGlobal, Input: json.RawMessage(`{"fixed":true}`)}}}
	p.submit(t, patch)
	require.Equal(t, oplog.JobFailed, p.await(t, patch.JobID).Status)

	var entries []struct {
		Partition  int32              `json:"partition"`
		Offset     int64              `json:"offset"`
		DeadLetter *record.DeadLetter `json:"deadLetter"`
	}
	require.Eventually(t, func() bool {
		code, out, _ := ctl(t, append([]string{"dlq", "list", "-o", "json"}, p.args...)...)
		return code == exitOK && json.Unmarshal([]byte(out), &entries) == nil && len(entries) == 1
	}, time.Minute, 100*time.Millisecond)
	require.Equal(t, patch.JobID, entries[0].DeadLetter.Job.JobID)
	require.Equal(t, record.ErrDocumentNotFound, entries[0].DeadLetter.ErrorType)

	// Fix the cause: create the document.
	create := &record.Job{JobID: "0193a000-0000-7000-8000-0000000000e2", Kind: record.KindCreate, DocumentID: "doc-late", DocumentType: "doclog/json"}
	p.submit(t, create)
	require.Equal(t, oplog.JobWriteReady, p.await(t, create.JobID).Status)

	code, out, errOut := ctl(t, append([]string{"dlq", "redrive", "--all", "-o", "json"}, p.args...)...)
	require.Equal(t, exitOK, code, errOut)
	var rows []struct {
		NewJobID string `json:"newJobId"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	res := p.await(t, rows[0].NewJobID)
	require.Equal(t, oplog.JobWriteReady, res.Status, "the redriven job succeeds: %+v", res.ErrorHistory)

	code, out, _ = ctl(t, append([]string{"docs", "get", "doc-late", "-o", "json"}, p.args...)...)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, `"fixed": true`)
}

func TestProjectorCommands(t *testing.T) {
	t.Parallel()
	p := startPipeline(t)
	for i, doc := range []string{"doc-a", "doc-b", "doc-c"} {
		job := &record.Job{JobID: "0193a000-0000-7000-8000-00000000010" + string(rune('0'+i)), Kind: record.KindCreate,
			DocumentID: doc, DocumentType: "doclog/json",
			Actions: []oplog.Action{{ID: "n", Type: "MERGE_PATCH", Scope: oplog.ScopeGlobal, Input: json.RawMessage(`{"n":1}`)}}}
		p.submit(t, job)
		require.Equal(t, oplog.JobWriteReady, p.await(t, job.JobID).Status)
	}
	// Wait until docview holds all three.
	var lists []struct {
		Name        string `json:"name"`
		Checkpoints []struct {
			NextOffset int64 `json:"NextOffset"`
			Epoch      int64 `json:"Epoch"`
		} `json:"checkpoints"`
		Quarantines []any `json:"quarantines"`
	}
	require.Eventually(t, func() bool {
		code, out, _ := ctl(t, append([]string{"projector", "list", "-o", "json"}, p.args...)...)
		if code != exitOK || json.Unmarshal([]byte(out), &lists) != nil {
			return false
		}
		var sum int64
		for _, c := range lists[0].Checkpoints {
			sum += max(c.NextOffset, 0)
		}
		return lists[0].Name == "docview" && sum == 3
	}, 2*time.Minute, 100*time.Millisecond, "docview's checkpoints reach the three records")
	require.Empty(t, lists[0].Quarantines)
	require.NotEmpty(t, lists[0].Checkpoints)
	require.Positive(t, lists[0].Checkpoints[0].Epoch)

	code, out, errOut := ctl(t, append([]string{"projector", "lag", "-o", "json"}, p.args...)...)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "doclog-docview")

	code, out, errOut = ctl(t, append([]string{"projector", "rebuild", "docview", "-o", "json"}, p.args...)...)
	require.Equal(t, exitOK, code, errOut)
	var rep struct {
		Generation string
		Built      struct{ Documents int }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotEmpty(t, rep.Generation)
	require.Equal(t, 3, rep.Built.Documents)

}
