package reduce

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// Stored returns a committed job's operations as its append stored them.
// A fresh append stored the operations reduce built: they are returned
// with what only the log assigns (ordinal, transaction id, write time)
// taken from its rows. A replay wrote nothing, and the job's operations
// are the rows stored before, which res holds; they are the log's, and
// may differ from what this reduce built from heads that were stale. For
// the jobs of one result, index it once with NewCommitted.
func Stored(built []oplog.Operation, res *oplog.AppendResult) []oplog.Operation {
	return NewCommitted(res).Stored(built)
}

// rowKey names a stored row: a placement may store an operation id again at
// a new index, even twice in one request, so the id alone does not.
type rowKey struct {
	opID   string
	stream oplog.StreamKey
	index  int64
}

// Committed is an append result with its rows indexed by operation (id,
// stream and index), so that each of the result's jobs finds its rows
// without a pass over all of them.
type Committed struct {
	res  *oplog.AppendResult
	rows map[rowKey]*oplog.Operation
}

// NewCommitted indexes res.
func NewCommitted(res *oplog.AppendResult) *Committed {
	c := &Committed{res: res}
	if !res.Replayed {
		c.rows = make(map[rowKey]*oplog.Operation, len(res.Operations))
		for i := range res.Operations {
			op := &res.Operations[i]
			c.rows[rowKey{op.OpID, op.Stream(), op.Index}] = op
		}
	}
	return c
}

// Stored is the package function Stored for one job of the result.
func (c *Committed) Stored(built []oplog.Operation) []oplog.Operation {
	if c.res.Replayed {
		return c.res.Operations
	}
	out := slices.Clone(built)
	for i := range out {
		if row := c.rows[rowKey{out[i].OpID, out[i].Stream(), out[i].Index}]; row != nil {
			out[i].Ordinal, out[i].TxID, out[i].WrittenAt = row.Ordinal, row.TxID, row.WrittenAt
		}
	}
	return out
}

// WriteReady builds the write-ready record of a committed job from its
// result and its operations (ops may hold other jobs' too: only the job's
// are announced). now stamps the record of a result without a write time.
func WriteReady(job *record.Job, jr oplog.JobResult, all []oplog.Operation, now time.Time) (*record.WriteReady, error) {
	var ops []oplog.Operation
	for _, op := range all {
		if op.JobID == jr.JobID {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("job %s is WRITE_READY but none of its operations was found", jr.JobID)
	}
	rank := map[oplog.StreamKey]int{}
	for i, r := range jr.Streams {
		rank[r.Stream] = i
	}
	slices.SortFunc(ops, func(a, b oplog.Operation) int {
		return cmp.Or(cmp.Compare(rank[a.Stream()], rank[b.Stream()]), cmp.Compare(a.Index, b.Index))
	})
	hashes := map[oplog.StreamKey]map[int64]string{}
	for _, op := range ops {
		if hashes[op.Stream()] == nil {
			hashes[op.Stream()] = map[int64]string{}
		}
		hashes[op.Stream()][op.Index] = op.Hash
	}
	wr := &record.WriteReady{
		JobID:            jr.JobID,
		DocumentID:       jr.DocumentID,
		DocumentType:     ops[0].DocumentType,
		Branch:           ops[0].Branch,
		ConsistencyToken: jr.Token,
		Operations:       ops,
		SubmittedAtUtcMs: job.SubmittedAtUtcMs,
		WrittenAtUtcMs:   now.UnixMilli(),
	}
	if !jr.CreatedAt.IsZero() {
		wr.WrittenAtUtcMs = jr.CreatedAt.UnixMilli()
	}
	for _, r := range jr.Streams {
		sw := record.StreamWrite{StreamRange: r}
		for i := r.FromIndex; i <= r.ToIndex; i++ {
			h, ok := hashes[r.Stream][i]
			if !ok {
				return nil, fmt.Errorf("job %s: operation %d of %s is missing", jr.JobID, i, r.Stream)
			}
			sw.Hashes = append(sw.Hashes, h)
		}
		wr.Streams = append(wr.Streams, sw)
	}
	return wr, nil
}
