package admin

import (
	"context"
	"fmt"
	"slices"
	"time"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// jobResultBatch bounds the ids of one JobResults call.
const jobResultBatch = 1000

// checkJobsOf checks the jobs of a document's operations (all its streams
// on every branch) against their stored results, and returns the ids of
// the jobs it checked.
func (v *verifier) checkJobsOf(ctx context.Context, documentID string, ops []oplog.Operation) (findings, notes []Finding, jobs []string, err error) {
	byJob := map[string][]oplog.Operation{}
	for _, op := range ops {
		if _, ok := byJob[op.JobID]; !ok {
			jobs = append(jobs, op.JobID)
		}
		byJob[op.JobID] = append(byJob[op.JobID], op)
	}
	slices.Sort(jobs)
	for chunk := range slices.Chunk(jobs, jobResultBatch) {
		results, err := v.cfg.Store.JobResults(ctx, chunk)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("verifying the jobs of %s: %w", documentID, err)
		}
		for _, id := range chunk {
			res, stored := results[id]
			fs, ns := checkJob(documentID, id, res, stored, byJob[id], v.oldestJob)
			findings, notes = append(findings, fs...), append(notes, ns...)
		}
	}
	return findings, notes, jobs, nil
}

// checkUnseenJobs pages every stored job result and checks the WRITE_READY
// ones the walk did not meet in any document's operations: a job whose
// operations are all gone, or one of a document outside the walked range
// (or committed after its document was walked), whose ranges are then read
// from the log. A FAILED job without operations is as it should be.
func (v *verifier) checkUnseenJobs(ctx context.Context) error {
	after := ""
	for {
		ids, err := v.cfg.Store.JobIDs(ctx, after, jobResultBatch)
		if err != nil {
			return fmt.Errorf("verifying job results: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		after = ids[len(ids)-1]
		var unseen []string
		for _, id := range ids {
			if _, ok := v.seen[id]; !ok {
				unseen = append(unseen, id)
			}
		}
		results, err := v.cfg.Store.JobResults(ctx, unseen)
		if err != nil {
			return fmt.Errorf("verifying job results: %w", err)
		}
		for _, id := range unseen {
			res, ok := results[id]
			if !ok || res.Status != oplog.JobWriteReady {
				continue // expired since it was listed, or FAILED
			}
			ops, err := v.operationsInRanges(ctx, res)
			if err != nil {
				return err
			}
			fs, _ := checkJob(res.DocumentID, id, res, true, ops, v.oldestJob)
			v.unseen = append(v.unseen, fs...)
			v.unseenChecked++
		}
		v.progress("jobs")
	}
}

// operationsInRanges reads the operations of the job in the ranges its
// result names.
func (v *verifier) operationsInRanges(ctx context.Context, res oplog.JobResult) ([]oplog.Operation, error) {
	var out []oplog.Operation
	for _, r := range res.Streams {
		if r.ToIndex < r.FromIndex {
			continue // checkJob reports the range itself
		}
		ops, err := v.cfg.Store.ReadStream(ctx, r.Stream, r.FromIndex, int(r.ToIndex-r.FromIndex+1))
		if err != nil {
			return nil, fmt.Errorf("verifying job %s: %w", res.JobID, err)
		}
		for _, op := range ops {
			if op.JobID == res.JobID && op.Index <= r.ToIndex {
				out = append(out, op)
			}
		}
	}
	return out, nil
}

// checkJob compares a job's result with the operations carrying its id: a
// WRITE_READY job has exactly one operation at every index of the ranges
// its result names and none elsewhere, with the op ids the job derives
// (model.OpID of its n-th action); a FAILED job has none. A load job's
// operations keep the ids their origin gave them, and the stored ones its
// placement moved keep theirs, so its op ids are only held to be distinct,
// and their number to what its result says the placement wrote (stored
// plus reshuffled).
func checkJob(documentID, jobID string, res oplog.JobResult, stored bool, ops []oplog.Operation, oldest time.Time) (findings, notes []Finding) {
	add := func(kind FindingKind, k *oplog.StreamKey, idx int64, format string, args ...any) {
		f := Finding{Kind: kind, DocumentID: documentID, Stream: k, Index: idx, JobID: jobID, Message: fmt.Sprintf(format, args...)}
		if kind == FindingJobResultMissing {
			notes = append(notes, f)
			return
		}
		findings = append(findings, f)
	}
	first := func() (*oplog.StreamKey, int64) {
		if len(ops) == 0 {
			return nil, -1
		}
		k := ops[0].Stream()
		return &k, ops[0].Index
	}
	switch {
	case !stored:
		var written time.Time
		for _, op := range ops {
			if op.WrittenAt.After(written) {
				written = op.WrittenAt
			}
		}
		k, idx := first()
		if oldest.IsZero() || written.Before(oldest) {
			add(FindingJobResultMissing, k, idx, "%d operation(s) of the job have no stored result; written before the oldest result kept, so retention may have removed it", len(ops))
			return
		}
		add(FindingJob, k, idx, "%d operation(s) of the job have no stored result, though results as old are kept (a job's result is written with its operations)", len(ops))
		return
	case res.Status == oplog.JobFailed:
		if len(ops) > 0 {
			k, idx := first()
			add(FindingJob, k, idx, "the job is FAILED but %d operation(s) carry its id", len(ops))
		}
		return
	case res.Status != oplog.JobWriteReady:
		k, idx := first()
		add(FindingJob, k, idx, "the job's stored status is %q, neither WRITE_READY nor FAILED", res.Status)
		return
	}
	if res.DocumentID != documentID {
		add(FindingJob, nil, -1, "the result names document %s, its operations are in %s", res.DocumentID, documentID)
	}

	type pos struct {
		stream oplog.StreamKey
		index  int64
	}
	have := make(map[pos]oplog.Operation, len(ops))
	for _, op := range ops {
		have[pos{op.Stream(), op.Index}] = op
	}
	total := 0
	inRanges := map[pos]bool{}
	for _, r := range res.Streams {
		k := r.Stream
		if r.ToIndex < r.FromIndex {
			add(FindingJob, &k, r.FromIndex, "the result names the empty range %d..%d", r.FromIndex, r.ToIndex)
			continue
		}
		var missing []int64
		for i := r.FromIndex; i <= r.ToIndex; i++ {
			total++
			inRanges[pos{k, i}] = true
			if _, ok := have[pos{k, i}]; !ok {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			add(FindingJob, &k, missing[0], "the result names %s %d..%d, but %d of those indexes hold no operation of the job (first %d)",
				k, r.FromIndex, r.ToIndex, len(missing), missing[0])
		}
	}
	wantIDs := make(map[string]bool, total)
	for n := range total {
		wantIDs[model.OpID(jobID, n)] = true
	}
	if res.Load != nil {
		wantIDs = nil
		var placed int64
		for _, ls := range res.Load.Streams {
			placed += ls.Stored + ls.Reshuffled
		}
		if placed != int64(total) {
			add(FindingJob, nil, -1, "the load's result says its placement wrote %d operation(s) (stored and reshuffled), its ranges hold %d", placed, total)
		}
	}
	used := map[string]bool{}
	for _, op := range ops {
		k := op.Stream()
		if !inRanges[pos{k, op.Index}] {
			add(FindingJob, &k, op.Index, "the operation carries the job's id but lies outside the ranges its result names")
		}
		switch {
		case wantIDs != nil && !wantIDs[op.OpID]:
			add(FindingJob, &k, op.Index, "op id %s is not one the job derives for its %d action(s)", op.OpID, total)
		case used[op.OpID]:
			add(FindingJob, &k, op.Index, "op id %s appears twice in the job", op.OpID)
		}
		used[op.OpID] = true
	}
	return findings, notes
}
