package postgres

import (
	"encoding/json"
	"fmt"

	oplog "github.com/doclog/doclog/log"
)

// plan is one validated request of a batch, with its job result rows encoded.
type plan struct {
	pos  int // position in the caller's batch
	req  *oplog.AppendRequest
	jobs []oplog.JobResult
	// encoded JSON of each job's streams, token and error history
	jobJSON [][3]string
	actions []string // encoded action of each operation, in stream order
}

// lockKey is the advisory-lock name of a stream. The unit separator cannot
// appear in ids that came through JSON unescaped by accident, and any
// collision only serializes two appends more than needed.
func lockKey(k oplog.StreamKey) string {
	return k.DocumentID + "\x1f" + k.Scope + "\x1f" + k.Branch
}

// planRequest validates a request and derives its job results. A request
// that fails here is refused without touching the database.
func planRequest(pos int, req *oplog.AppendRequest) (*plan, error) {
	invalid := func(format string, args ...any) error {
		return &oplog.InvalidRequest{DocumentID: req.DocumentID, Reason: fmt.Sprintf(format, args...)}
	}
	if req.DocumentID == "" {
		return nil, invalid("empty document id")
	}
	p := &plan{pos: pos, req: req}
	status := make(map[string]oplog.JobStatus, len(req.Jobs))
	for _, j := range req.Jobs {
		if j.JobID == "" {
			return nil, invalid("a job outcome has an empty job id")
		}
		if _, dup := status[j.JobID]; dup {
			return nil, invalid("job %s is listed twice", j.JobID)
		}
		if j.Status != oplog.JobWriteReady && j.Status != oplog.JobFailed {
			return nil, invalid("job %s has status %q; a result is WRITE_READY or FAILED", j.JobID, j.Status)
		}
		status[j.JobID] = j.Status
	}

	ranges := make(map[string][]oplog.StreamRange, len(req.Jobs))
	seen := make(map[oplog.StreamKey]bool, len(req.Streams))
	nops := 0
	for si := range req.Streams {
		sa := &req.Streams[si]
		if sa.Stream.DocumentID != req.DocumentID {
			return nil, invalid("stream %s belongs to another document", sa.Stream)
		}
		if sa.Stream.Scope == "" || sa.Stream.Branch == "" {
			return nil, invalid("stream %s has an empty scope or branch", sa.Stream)
		}
		if seen[sa.Stream] {
			return nil, invalid("stream %s is listed twice", sa.Stream)
		}
		seen[sa.Stream] = true
		if sa.ExpectedRevision < 0 {
			return nil, invalid("stream %s has negative expected revision %d", sa.Stream, sa.ExpectedRevision)
		}
		for oi := range sa.Operations {
			op := &sa.Operations[oi]
			want := sa.ExpectedRevision + int64(oi)
			if op.Stream() != sa.Stream {
				return nil, invalid("operation %s names stream %s inside stream %s", op.OpID, op.Stream(), sa.Stream)
			}
			if op.Index != want {
				return nil, invalid("operation %s of %s has index %d, want %d (expected revision %d + position %d)",
					op.OpID, sa.Stream, op.Index, want, sa.ExpectedRevision, oi)
			}
			if err := oplog.ValidateOperation(op); err != nil {
				return nil, invalid("%s", err.Error())
			}
			if op.Action.Scope != "" && op.Action.Scope != op.Scope {
				return nil, invalid("operation %s is in scope %s but its action names scope %s", op.OpID, op.Scope, op.Action.Scope)
			}
			switch status[op.JobID] {
			case oplog.JobWriteReady:
			case oplog.JobFailed:
				return nil, invalid("operation %s belongs to job %s, which the request fails", op.OpID, op.JobID)
			default:
				return nil, invalid("operation %s belongs to job %s, which the request does not settle", op.OpID, op.JobID)
			}
			rs := ranges[op.JobID]
			if n := len(rs); n > 0 && rs[n-1].Stream == sa.Stream && rs[n-1].ToIndex == op.Index-1 {
				rs[n-1].ToIndex = op.Index
			} else {
				rs = append(rs, oplog.StreamRange{Stream: sa.Stream, FromIndex: op.Index, ToIndex: op.Index})
			}
			ranges[op.JobID] = rs
			nops++
		}
	}
	kfSeen := make(map[oplog.StreamKey]bool, len(req.Keyframes))
	for _, kf := range req.Keyframes {
		if !seen[kf.Stream] {
			return nil, invalid("keyframe for %s, a stream the request does not write", kf.Stream)
		}
		if kfSeen[kf.Stream] {
			return nil, invalid("two keyframes for %s", kf.Stream)
		}
		kfSeen[kf.Stream] = true
		if kf.Index < 0 || !json.Valid(kf.State) {
			return nil, invalid("keyframe for %s at index %d: negative index or invalid state JSON", kf.Stream, kf.Index)
		}
	}
	if req.Condition != nil {
		for _, c := range req.Condition.Streams {
			if c.Revision < 0 {
				return nil, invalid("read-set stream %s has negative revision %d", c.Stream, c.Revision)
			}
		}
	}

	p.actions = make([]string, 0, nops)
	for si := range req.Streams {
		for oi := range req.Streams[si].Operations {
			b, err := json.Marshal(&req.Streams[si].Operations[oi].Action)
			if err != nil {
				return nil, invalid("encoding action of operation %s: %v", req.Streams[si].Operations[oi].OpID, err)
			}
			p.actions = append(p.actions, string(b))
		}
	}

	p.jobs = make([]oplog.JobResult, len(req.Jobs))
	p.jobJSON = make([][3]string, len(req.Jobs))
	for i, j := range req.Jobs {
		r := oplog.JobResult{JobID: j.JobID, DocumentID: req.DocumentID, Status: j.Status, ErrorHistory: j.ErrorHistory}
		if j.Load != nil && j.Status != oplog.JobWriteReady {
			return nil, invalid("job %s carries a load summary but the request fails it", j.JobID)
		}
		if j.Load != nil {
			for _, ls := range j.Load.Streams {
				if ls.Stream.DocumentID != req.DocumentID {
					return nil, invalid("load summary of job %s names stream %s of another document", j.JobID, ls.Stream)
				}
				if ls.Stored < 0 || ls.Replayed < 0 || ls.Superseded < 0 || ls.Reshuffled < 0 || ls.Skip < 0 {
					return nil, invalid("load summary of job %s has a negative count for stream %s", j.JobID, ls.Stream)
				}
			}
		}
		if j.Status == oplog.JobWriteReady {
			r.Streams = ranges[j.JobID]
			r.Load = j.Load
			r.Token.Coordinates = make([]oplog.Coordinate, len(r.Streams))
			for k, rg := range r.Streams {
				r.Token.Coordinates[k] = oplog.Coordinate{DocumentID: rg.Stream.DocumentID, Scope: rg.Stream.Scope, Branch: rg.Stream.Branch, Index: rg.ToIndex}
			}
		}
		p.jobs[i] = r
		enc, err := encodeJobJSON(&r)
		if err != nil {
			return nil, invalid("encoding result of job %s: %v", j.JobID, err)
		}
		p.jobJSON[i] = enc
	}
	return p, nil
}

// storedToken is the JSON of the jobs table's token column: the result's
// consistency token and, for a load job, its load summary. The summary rides
// in this column rather than one of its own because it is an object every
// reader decodes into a struct, so a reader that predates the member
// ignores it and no migration is needed; the streams column is an array of
// ranges, which has no place for a stream the load only replayed.
type storedToken struct {
	Coordinates []oplog.Coordinate `json:"coordinates"`
	Load        *oplog.LoadSummary `json:"load,omitempty"`
}

func encodeJobJSON(r *oplog.JobResult) ([3]string, error) {
	var out [3]string
	streams := r.Streams
	if streams == nil {
		streams = []oplog.StreamRange{}
	}
	coords := storedToken{Coordinates: r.Token.Coordinates, Load: r.Load}
	if coords.Coordinates == nil {
		coords.Coordinates = []oplog.Coordinate{}
	}
	if coords.Load != nil && coords.Load.Streams == nil {
		coords.Load = &oplog.LoadSummary{Streams: []oplog.LoadStream{}}
	}
	errs := r.ErrorHistory
	if errs == nil {
		errs = []oplog.ErrorInfo{}
	}
	for i, v := range []any{streams, coords, errs} {
		b, err := json.Marshal(v)
		if err != nil {
			return out, err
		}
		out[i] = string(b)
	}
	return out, nil
}

// lockKeys are the streams a plan writes or reads.
func (p *plan) lockKeys(dst []string) []string {
	for _, sa := range p.req.Streams {
		dst = append(dst, lockKey(sa.Stream))
	}
	if p.req.Condition != nil {
		for _, c := range p.req.Condition.Streams {
			dst = append(dst, lockKey(c.Stream))
		}
	}
	return dst
}

// independent reports whether the plans can be guarded by one statement:
// one statement sees the database as it was before any of its inserts, so a
// request that reads or writes a stream another request of the batch writes,
// or that shares a job with it, must be checked after that other request.
func independent(plans []*plan) bool {
	written := make(map[oplog.StreamKey]struct{})
	jobs := make(map[string]struct{})
	for _, p := range plans {
		for _, sa := range p.req.Streams {
			if _, dup := written[sa.Stream]; dup {
				return false
			}
			written[sa.Stream] = struct{}{}
		}
		for _, j := range p.req.Jobs {
			if _, dup := jobs[j.JobID]; dup {
				return false
			}
			jobs[j.JobID] = struct{}{}
		}
	}
	for _, p := range plans {
		if p.req.Condition == nil {
			continue
		}
		for _, c := range p.req.Condition.Streams {
			if _, w := written[c.Stream]; !w {
				continue
			}
			// Reading a stream it writes itself is the usual case.
			own := false
			for _, sa := range p.req.Streams {
				if sa.Stream == c.Stream {
					own = true
					break
				}
			}
			if !own {
				return false
			}
		}
	}
	return true
}
