package postgres

import (
	"context"
	"fmt"

	oplog "github.com/doclog/doclog/log"
)

// diagnose explains why a request did not land and fills res. It runs after
// the batch committed; every cause it looks for (a taken position, a grown
// stream, a stored job result, a stored identity) stays true once true, so it
// finds what the guard saw. The replay check comes first, so a re-delivered
// request is never reported as the conflict that its own earlier success
// caused.
func (s *Store) diagnose(ctx context.Context, p *plan, raised error, res *oplog.AppendResult) error {
	req := p.req
	ids := make([]string, len(req.Jobs))
	for i, j := range req.Jobs {
		ids[i] = j.JobID
	}
	results, err := s.JobResults(ctx, ids)
	if err != nil {
		return fmt.Errorf("diagnosing append for document %s: %w", req.DocumentID, err)
	}
	if len(ids) > 0 && len(results) == len(ids) {
		return s.replayFromResults(ctx, req, results, res)
	}

	var streams []oplog.StreamKey
	for _, sa := range req.Streams {
		streams = append(streams, sa.Stream)
	}
	if req.Condition != nil {
		for _, c := range req.Condition.Streams {
			streams = append(streams, c.Stream)
		}
	}
	heads, err := s.streamHeads(ctx, streams)
	if err != nil {
		return fmt.Errorf("diagnosing append for document %s: %w", req.DocumentID, err)
	}

	// Replay by position: every operation already stored at its index with
	// the same opId and skip.
	var replayed []oplog.Operation
	nops, matched := 0, 0
	for _, sa := range req.Streams {
		if len(sa.Operations) == 0 {
			continue
		}
		nops += len(sa.Operations)
		stored, err := s.ReadStream(ctx, sa.Stream, sa.ExpectedRevision, len(sa.Operations))
		if err != nil {
			return fmt.Errorf("diagnosing append for document %s: %w", req.DocumentID, err)
		}
		for i, st := range stored {
			op := &sa.Operations[i]
			if st.OpID != op.OpID || st.Skip != op.Skip {
				res.Err = &oplog.RevisionMismatch{Stream: sa.Stream, Expected: sa.ExpectedRevision, Actual: heads[sa.Stream], OpID: op.OpID, Index: op.Index}
				return nil
			}
			matched++
		}
		replayed = append(replayed, stored...)
	}
	if nops > 0 && matched == nops {
		res.Replayed = true
		res.Operations = replayed
		res.Jobs = orderedResults(ids, results)
		return nil
	}

	for _, sa := range req.Streams {
		if h := heads[sa.Stream]; h != sa.ExpectedRevision {
			res.Err = &oplog.RevisionMismatch{Stream: sa.Stream, Expected: sa.ExpectedRevision, Actual: h}
			return nil
		}
	}
	if req.Condition != nil {
		for _, c := range req.Condition.Streams {
			if h := heads[c.Stream]; h > c.Revision {
				res.Err = &oplog.AppendConditionFailed{Stream: c.Stream, Recorded: c.Revision, Actual: h}
				return nil
			}
		}
	}
	for _, id := range ids {
		if r, ok := results[id]; ok {
			res.Err = &oplog.JobAlreadySettled{DocumentID: req.DocumentID, JobID: id, Status: r.Status}
			return nil
		}
	}
	if dup, err := s.findDuplicate(ctx, req); err != nil {
		return fmt.Errorf("diagnosing append for document %s: %w", req.DocumentID, err)
	} else if dup != nil {
		res.Err = dup
		return nil
	}
	if raised != nil {
		res.Err = &oplog.InvalidRequest{DocumentID: req.DocumentID, Reason: raised.Error()}
		return nil
	}
	// The guard failed on a cause that no longer shows, which only an
	// expected revision ahead of the stream can produce: a conflict either
	// way, so the caller reloads.
	k := oplog.StreamKey{DocumentID: req.DocumentID, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}
	var expected int64
	if len(req.Streams) > 0 {
		k, expected = req.Streams[0].Stream, req.Streams[0].ExpectedRevision
	}
	res.Err = &oplog.RevisionMismatch{Stream: k, Expected: expected, Actual: heads[k]}
	return nil
}

func orderedResults(ids []string, results map[string]oplog.JobResult) []oplog.JobResult {
	out := make([]oplog.JobResult, 0, len(ids))
	for _, id := range ids {
		if r, ok := results[id]; ok {
			out = append(out, r)
		}
	}
	return out
}

// replayFromResults answers a request whose jobs all have results with those
// results and the operations they name.
func (s *Store) replayFromResults(ctx context.Context, req *oplog.AppendRequest, results map[string]oplog.JobResult, res *oplog.AppendResult) error {
	res.Replayed = true
	res.Jobs = make([]oplog.JobResult, 0, len(req.Jobs))
	for _, j := range req.Jobs {
		r := results[j.JobID]
		res.Jobs = append(res.Jobs, r)
		for _, rg := range r.Streams {
			ops, err := s.ReadStream(ctx, rg.Stream, rg.FromIndex, int(rg.ToIndex-rg.FromIndex+1))
			if err != nil {
				return fmt.Errorf("reading operations of settled job %s: %w", j.JobID, err)
			}
			res.Operations = append(res.Operations, ops...)
		}
	}
	return nil
}

// findDuplicate looks for an operation identity of the request stored in
// another stream.
func (s *Store) findDuplicate(ctx context.Context, req *oplog.AppendRequest) (*oplog.DuplicateOperation, error) {
	var opIDs []string
	var idxs, skips []int64
	owner := map[[3]any]oplog.StreamKey{}
	for _, sa := range req.Streams {
		for _, op := range sa.Operations {
			opIDs = append(opIDs, op.OpID)
			idxs = append(idxs, op.Index)
			skips = append(skips, op.Skip)
			owner[[3]any{op.OpID, op.Index, op.Skip}] = sa.Stream
		}
	}
	if len(opIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT o.op_id, o.idx, o.skip, o.document_id, o.scope, o.branch
FROM unnest($1::text[], $2::int8[], $3::int8[]) AS t(op_id, idx, skip)
JOIN operations AS o ON o.op_id = t.op_id AND o.idx = t.idx AND o.skip = t.skip`, opIDs, idxs, skips)
	if err != nil {
		return nil, fmt.Errorf("looking up operation identities: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d oplog.DuplicateOperation
		if err := rows.Scan(&d.OpID, &d.Index, &d.Skip, &d.Existing.DocumentID, &d.Existing.Scope, &d.Existing.Branch); err != nil {
			return nil, fmt.Errorf("looking up operation identities: %w", err)
		}
		d.Stream = owner[[3]any{d.OpID, d.Index, d.Skip}]
		if d.Stream != d.Existing {
			rows.Close()
			return &d, nil
		}
	}
	return nil, rows.Err()
}
