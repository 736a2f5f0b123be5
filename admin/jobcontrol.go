package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// Job control reads the jobs topic from outside the executor group: a job is
// queued while its record lies at or beyond the group's committed offset on
// its partition and it has no result in the log. The executor commits a
// partition only up to its oldest unsettled record, so every job not yet
// settled is found this way; a settled one whose offset is not committed yet
// is dropped by its result.

// QueuedJob is a job on the jobs topic that has no result yet.
type QueuedJob struct {
	JobID        string      `json:"jobId"`
	DocumentID   string      `json:"documentId"`
	DocumentType string      `json:"documentType,omitempty"`
	Kind         record.Kind `json:"kind,omitempty"`
	Partition    int32       `json:"partition"`
	Offset       int64       `json:"offset"`
	// SubmittedAt is the record's timestamp.
	SubmittedAt time.Time `json:"submittedAt"`
	AgeSeconds  float64   `json:"ageSeconds"`
	// WaitsFor lists the jobs of its queueHint that have no result yet: it
	// is parked until they are WRITE_READY (and fails if one fails).
	WaitsFor []string `json:"waitsFor,omitempty"`
	// Behind is the earliest queued job of the same document that is parked
	// on a dependency: a document's jobs never overtake each other, so this
	// one waits behind it.
	Behind string `json:"behind,omitempty"`
	// DecodeError is set for a record that is not a valid job; the executor
	// dead-letters it (with a FAILED result when its job id is readable).
	DecodeError string `json:"decodeError,omitempty"`

	hint []string // its queueHint
}

// Parked reports whether the job waits on a dependency, its own or an
// earlier job's of its document. Only what the log shows is reported: a
// member's backoff after a transient error, or a wait for a model it does
// not know, lives in its memory and is not observable from here.
func (q QueuedJob) Parked() bool { return len(q.WaitsFor) > 0 || q.Behind != "" }

// QueueFilter narrows QueuedJobs. The zero value keeps every queued job.
type QueueFilter struct {
	// Partition keeps one partition's jobs; nil keeps all.
	Partition *int32
	// DocumentID keeps one document's jobs.
	DocumentID string
	// JobID keeps the records of one job.
	JobID string
	// Parked keeps only the jobs waiting on a dependency.
	Parked bool
}

// JobResulter looks job results up by id (oplog.Store has it).
type JobResulter interface {
	JobResults(ctx context.Context, jobIDs []string) (map[string]oplog.JobResult, error)
}

// resultChunk bounds the job ids looked up in one query.
const resultChunk = 1000

// QueuedJobs lists the jobs still waiting for the executor group: the
// records of the jobs topic from the group's committed offset (the
// partition's start when it has none) to the end the call found, minus the
// jobs that have a result. It uses no consumer group, so looking moves
// nobody's offsets. Jobs come in partition and offset order.
func QueuedJobs(ctx context.Context, cfg kafka.Config, results JobResulter, topic, group string, f QueueFilter, now time.Time) ([]QueuedJob, error) {
	admCl, err := kafka.NewClient(cfg, nil)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	starts, ends, err := partitionBounds(ctx, adm, topic)
	if err != nil {
		return nil, fmt.Errorf("listing queued jobs: %w", err)
	}
	if f.Partition != nil {
		if _, ok := ends[*f.Partition]; !ok {
			return nil, fmt.Errorf("listing queued jobs: %s has no partition %d", topic, *f.Partition)
		}
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("listing queued jobs: committed offsets of group %s: %w", group, err)
	}
	from := map[int32]int64{}
	for p, start := range starts {
		if f.Partition != nil && p != *f.Partition {
			continue
		}
		from[p] = start
		if c, ok := committed.Lookup(topic, p); ok {
			if c.Err != nil {
				return nil, fmt.Errorf("listing queued jobs: committed offset of group %s on partition %d: %w", group, p, c.Err)
			}
			from[p] = max(start, c.At)
		}
	}
	out := []QueuedJob{}
	err = readPartitions(ctx, cfg, topic, from, ends, func(rec *kgo.Record) {
		q := QueuedJob{Partition: rec.Partition, Offset: rec.Offset, SubmittedAt: rec.Timestamp,
			AgeSeconds: max(now.Sub(rec.Timestamp).Seconds(), 0)}
		if job, err := record.DecodeJob(rec); err != nil {
			id, doc, ok := record.ReadableIdentity(rec)
			if !ok {
				return // no job id: nothing to look up or cancel; it is dead-lettered
			}
			q.JobID, q.DocumentID, q.DecodeError = id, doc, err.Error()
		} else {
			q.JobID, q.DocumentID, q.DocumentType, q.Kind = job.JobID, job.DocumentID, job.DocumentType, job.Kind
			q.hint = job.QueueHint
		}
		if (f.DocumentID != "" && q.DocumentID != f.DocumentID) || (f.JobID != "" && q.JobID != f.JobID) {
			return
		}
		out = append(out, q)
	})
	if err != nil {
		return nil, fmt.Errorf("listing queued jobs: %w", err)
	}

	// Partitions are read at once; put each back in offset order, drop the
	// settled, then mark what waits on what.
	slices.SortFunc(out, func(a, b QueuedJob) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	ids := make([]string, 0, len(out))
	for _, q := range out {
		ids = append(ids, q.JobID)
		ids = append(ids, q.hint...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	found := make(map[string]oplog.JobResult, len(ids))
	for chunk := range slices.Chunk(ids, resultChunk) {
		got, err := results.JobResults(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("listing queued jobs: looking up results: %w", err)
		}
		for id, r := range got {
			found[id] = r
		}
	}
	kept := out[:0]
	parkedDoc := map[string]string{} // document -> its earliest job parked on a dependency
	for _, q := range out {
		if _, ok := found[q.JobID]; ok {
			continue
		}
		for _, h := range q.hint {
			if _, ok := found[h]; !ok {
				q.WaitsFor = append(q.WaitsFor, h)
			}
		}
		key := fmt.Sprintf("%d/%s", q.Partition, q.DocumentID)
		if first, ok := parkedDoc[key]; ok && first != q.JobID {
			q.Behind = first
		} else if len(q.WaitsFor) > 0 {
			parkedDoc[key] = q.JobID
		}
		if f.Parked && !q.Parked() {
			continue
		}
		kept = append(kept, q)
	}
	return kept, nil
}

// ErrNotQueued reports a job that has neither a result nor a record waiting
// for the executor group: never submitted, already expired from the topic,
// or not produced yet.
var ErrNotQueued = errors.New("no such job is queued: it has no result and no record beyond the executor group's committed offsets")

// CancelOutcome is what CancelJob did.
type CancelOutcome struct {
	// Cancelled is true when this call settled the job as FAILED with
	// Cancelled; false when the job had a result already (the executor, or
	// an earlier cancel, settled it first), which Result then holds.
	Cancelled bool            `json:"cancelled"`
	Result    oplog.JobResult `json:"result"`
}

// Appender writes job results under the log's guards (oplog.Store has it).
type Appender interface {
	JobResulter
	Append(ctx context.Context, reqs []oplog.AppendRequest) ([]oplog.AppendResult, error)
}

// CancelJob settles a queued job as FAILED with the error name Cancelled,
// under the rule every job result obeys: a job id is settled once, first
// settle wins. The result goes in as a request with no stream, guarded only
// by the job id (the insert happens only if the job has no result), so it
// races the executor safely: if the executor settled the job first the
// cancel writes nothing and returns the job's real result; if the cancel
// lands first, the executor finds the result when it reaches the record
// (it looks every job up before reducing it, and its own append of the job
// is answered with the stored result) and announces it as a dead letter,
// applying nothing. The document comes from the job's record, found on the
// topic beyond the group's committed offsets (see QueuedJobs).
func CancelJob(ctx context.Context, cfg kafka.Config, store Appender, topic, group, jobID, reason string, partition *int32, now time.Time) (CancelOutcome, error) {
	got, err := store.JobResults(ctx, []string{jobID})
	if err != nil {
		return CancelOutcome{}, fmt.Errorf("cancelling job %s: %w", jobID, err)
	}
	if r, ok := got[jobID]; ok {
		return CancelOutcome{Result: r}, nil
	}
	queued, err := QueuedJobs(ctx, cfg, store, topic, group, QueueFilter{JobID: jobID, Partition: partition}, now)
	if err != nil {
		return CancelOutcome{}, fmt.Errorf("cancelling job %s: %w", jobID, err)
	}
	if len(queued) == 0 {
		// It may have been settled since the first look.
		if got, err = store.JobResults(ctx, []string{jobID}); err != nil {
			return CancelOutcome{}, fmt.Errorf("cancelling job %s: %w", jobID, err)
		}
		if r, ok := got[jobID]; ok {
			return CancelOutcome{Result: r}, nil
		}
		return CancelOutcome{}, fmt.Errorf("cancelling job %s: %w", jobID, ErrNotQueued)
	}
	q := queued[0]
	msg := "cancelled by an operator"
	if reason != "" {
		msg += ": " + reason
	}
	req := oplog.AppendRequest{
		DocumentID:   q.DocumentID,
		DocumentType: q.DocumentType,
		Jobs: []oplog.JobOutcome{{JobID: jobID, Status: oplog.JobFailed,
			ErrorHistory: []oplog.ErrorInfo{{Name: executor.NameCancelled, Message: msg}}}},
	}
	res, err := store.Append(ctx, []oplog.AppendRequest{req})
	if err != nil {
		return CancelOutcome{}, fmt.Errorf("cancelling job %s: %w", jobID, err)
	}
	if len(res) != 1 {
		return CancelOutcome{}, fmt.Errorf("cancelling job %s: the log answered %d results for 1 request", jobID, len(res))
	}
	if res[0].Err != nil {
		return CancelOutcome{}, fmt.Errorf("cancelling job %s: %w", jobID, res[0].Err)
	}
	if len(res[0].Jobs) != 1 {
		return CancelOutcome{}, fmt.Errorf("cancelling job %s: the log answered %d job results", jobID, len(res[0].Jobs))
	}
	return CancelOutcome{Cancelled: !res[0].Replayed, Result: res[0].Jobs[0]}, nil
}
