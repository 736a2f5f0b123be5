package ctlcli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/spf13/cobra"

	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

func newJobsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Look up, submit, list, cancel and pause jobs"}
	var retention time.Duration
	get := &cobra.Command{
		Use:   "get JOB_ID...",
		Short: "Show the stored results of jobs, as GET /v1/jobs/{id} does (PENDING when a job has none yet)",
		Long: `Show the stored results of jobs, as the ingest API's GET /v1/jobs/{id} does:
WRITE_READY with the ranges written and the consistency token (the string the
read store takes as it is), FAILED with the error, PENDING for a job with no
result yet. A malformed id (not a lowercase UUID) exits 2; a UUIDv7 id older
than the jobs topic's retention that has no result names no job that can
still run: not found, exit 1.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkJobIDs(args); err != nil {
				return err
			}
			return g.withStore(cmd.Context(), func(ctx context.Context, s *postgres.Store) error {
				list, lookupErr := lookUpJobs(ctx, s, args, retention)
				if len(list) > 0 {
					if err := g.renderStatuses(list); err != nil {
						return err
					}
				}
				return lookupErr
			})
		},
	}
	get.Flags().DurationVar(&retention, "topics-jobs-retention", kafka.DefaultJobsRetention, "retention of the jobs topic (as doclog serve's): a UUIDv7 job older than this with no result is not found")
	cmd.AddCommand(get)
	cmd.AddCommand(newJobsSubmitCmd(g), newJobsListCmd(g), newJobsCancelCmd(g))
	cmd.AddCommand(newJobsPauseCmds(g)...)
	return cmd
}

func newJobsSubmitCmd(g *globals) *cobra.Command {
	var (
		file, docID, docType, kind, branch, actions, key string
		wait                                             time.Duration
	)
	submit := &cobra.Command{
		Use:   "submit",
		Short: "Submit a job straight to the jobs topic (a doclog.job.v1 file, or flags)",
		Long: `Submit a job straight to the jobs topic, as any producer may.

Either --file names a doclog.job.v1 JSON document ("-" for standard input; its
jobId may be omitted), or --document-id, --type and --actions (a JSON array of
{id?, type, scope, input}) describe it. Actions without an id get one derived
from the job id and position. With --wait the command polls the job's result
in the log until it is WRITE_READY or FAILED (exit 3 when FAILED).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			job, err := buildJob(file, docID, docType, kind, branch, actions, key, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return g.submitJob(cmd.Context(), job, wait)
		},
	}
	f := submit.Flags()
	f.StringVar(&file, "file", "", `a doclog.job.v1 JSON file ("-": standard input)`)
	f.StringVar(&docID, "document-id", "", "document the job targets")
	f.StringVar(&docType, "type", "", "document type, e.g. doclog/json")
	f.StringVar(&kind, "kind", string(record.KindMutate), "create, mutate or delete")
	f.StringVar(&branch, "branch", oplog.DefaultBranch, "branch")
	f.StringVar(&actions, "actions", "", `JSON array of actions, e.g. [{"type":"MERGE_PATCH","scope":"global","input":{"a":1}}]`)
	f.StringVar(&key, "idempotency-key", "", "derive the job id from this key, so resubmitting is the same job")
	f.DurationVar(&wait, "wait", 0, "wait this long for the job's result")
	return submit
}

// submitJob produces a job to the jobs topic, waits for its result when
// wait is set, and prints its status; a FAILED job exits 3.
func (g *globals) submitJob(ctx context.Context, job *record.Job, wait time.Duration) error {
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	rec, err := record.NewJobRecord(g.topics().Jobs, job)
	if err != nil {
		return usageError{err}
	}
	cl, err := kafka.NewClient(g.kafka(), nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("producing job %s: %w", job.JobID, err)
	}
	result := oplog.JobResult{JobID: job.JobID, DocumentID: job.DocumentID, Status: oplog.JobPending}
	if wait > 0 {
		if result, err = g.awaitJob(ctx, job.JobID, wait); err != nil {
			return err
		}
	}
	status := statusOf(result)
	status.DocumentID = job.DocumentID
	if err := g.render(status, func(t table.Writer) {
		t.AppendHeader(table.Row{"job", "document", "status", "written", "consistency token", "error"})
		t.AppendRow(table.Row{status.JobID, status.DocumentID, status.Status, written(status), status.ConsistencyToken, failure(status)})
	}); err != nil {
		return err
	}
	if result.Status == oplog.JobFailed {
		return errProblemsFound
	}
	return nil
}

func buildJob(file, docID, docType, kind, branch, actions, key string, stdin io.Reader) (*record.Job, error) {
	job := &record.Job{}
	if file != "" {
		var raw []byte
		var err error
		if file == "-" {
			raw, err = io.ReadAll(stdin)
		} else {
			raw, err = os.ReadFile(file)
		}
		if err != nil {
			return nil, usagef("reading %s: %v", file, err)
		}
		// The file may leave the id to us: fill it in before strict decoding.
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, usagef("%s is not a JSON object: %v", file, err)
		}
		if _, ok := probe["jobId"]; !ok {
			probe["jobId"], _ = json.Marshal(newJobID(key))
		}
		if _, ok := probe["schema"]; !ok {
			probe["schema"], _ = json.Marshal(record.SchemaJobV1)
		}
		raw, _ = json.Marshal(probe)
		parsed, err := record.ParseJob(raw)
		if err != nil {
			return nil, usageError{err}
		}
		job = parsed
	} else {
		if docID == "" || docType == "" {
			return nil, usagef("give --file, or --document-id and --type")
		}
		job = &record.Job{JobID: newJobID(key), Kind: record.Kind(kind), DocumentID: docID, DocumentType: docType, Branch: branch}
		if actions != "" {
			if err := json.Unmarshal([]byte(actions), &job.Actions); err != nil {
				return nil, usagef("--actions is not a JSON array of actions: %v", err)
			}
		}
	}
	now := time.Now()
	for i := range job.Actions {
		a := &job.Actions[i]
		if a.ID == "" {
			a.ID = fmt.Sprintf("%s:%d", job.JobID, i)
		}
		if a.TimestampUtcMs == 0 {
			a.TimestampUtcMs = now.UnixMilli()
		}
	}
	job.SubmittedAtUtcMs = now.UnixMilli()
	return job, nil
}

func newJobID(key string) string {
	if key != "" {
		return model.JobIDFromIdempotencyKey(key)
	}
	return uuid.Must(uuid.NewV7()).String()
}

// awaitJob polls the log until the job has a result or wait passes; a job
// still without one is reported PENDING.
func (g *globals) awaitJob(ctx context.Context, jobID string, wait time.Duration) (oplog.JobResult, error) {
	s, err := g.store(ctx)
	if err != nil {
		return oplog.JobResult{}, err
	}
	defer s.Close()
	deadline := time.Now().Add(wait)
	for {
		found, err := s.JobResults(ctx, []string{jobID})
		if err != nil {
			return oplog.JobResult{}, err
		}
		if r, ok := found[jobID]; ok {
			return r, nil
		}
		if time.Now().After(deadline) {
			return oplog.JobResult{JobID: jobID, Status: oplog.JobPending}, nil
		}
		select {
		case <-ctx.Done():
			return oplog.JobResult{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
