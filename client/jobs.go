package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/doclog/doclog/internal/backoff"
)

// Job statuses, as JobStatus.Status reports them. A status never regresses.
const (
	// StatusPending: no result yet.
	StatusPending = "PENDING"
	// StatusWriteReady: the executor committed the job; the status carries
	// the consistency token.
	StatusWriteReady = "WRITE_READY"
	// StatusReadReady: committed, and the document view has applied it.
	StatusReadReady = "READ_READY"
	// StatusFailed: the job will never be committed; see ErrorHistory.
	StatusFailed = "FAILED"
)

// JobStatus is a job's status (GET /v1/jobs/{id}).
type JobStatus struct {
	JobID  string `json:"jobId"`
	Status string `json:"status"`
	// DocumentID is set once the job has a result.
	DocumentID string `json:"documentId,omitempty"`
	// Streams are the ranges of operations the job wrote.
	Streams []StreamRange `json:"streams,omitempty"`
	// ConsistencyToken, set from WRITE_READY on, is what a read takes
	// (WithConsistencyToken) to see this job's writes. It is opaque: pass
	// it as it is.
	ConsistencyToken string `json:"consistencyToken,omitempty"`
	// Coordinates are what the token encodes, one per stream the job
	// wrote; send the token, not these.
	Coordinates []Coordinate `json:"coordinates,omitempty"`
	// ErrorHistory is set when the job FAILED.
	ErrorHistory []ErrorInfo `json:"errorHistory,omitempty"`
	// Load is what a load job's placement did in each stream, set once it
	// is WRITE_READY; nil for any other job.
	Load *LoadResult `json:"load,omitempty"`
	// CompletedAt is when the result was stored; nil while PENDING.
	CompletedAt *time.Time `json:"completedAt,omitempty"`
}

// Done reports whether the job has its result: anything but PENDING.
func (s *JobStatus) Done() bool { return s.Status != StatusPending }

// StreamKey names one stream of operations: a document's scope on a
// branch.
type StreamKey struct {
	DocumentID string `json:"documentId"`
	Scope      string `json:"scope"`
	Branch     string `json:"branch"`
}

// StreamRange is the indexes a job wrote in one stream, both inclusive.
type StreamRange struct {
	Stream    StreamKey `json:"stream"`
	FromIndex int64     `json:"fromIndex"`
	ToIndex   int64     `json:"toIndex"`
}

// LoadResult is what a load job's placement did, per stream its operations
// name, the document scope first.
type LoadResult struct {
	Streams []LoadStream `json:"streams"`
}

// LoadStream counts what a load did in one stream. Stored, Replayed and
// Superseded add up to the load's operations of the stream.
type LoadStream struct {
	Stream StreamKey `json:"stream"`
	// Stored is how many of the load's operations were written.
	Stored int64 `json:"stored"`
	// Replayed is how many the stream already held: not written again.
	Replayed int64 `json:"replayed"`
	// Superseded is how many the origin's own skips superseded within the
	// load: not placed.
	Superseded int64 `json:"superseded"`
	// Reshuffled is how many stored operations a merge re-appended after
	// the head, merged with the new ones; 0 for an append.
	Reshuffled int64 `json:"reshuffled"`
	// Skip is the skip of the merge's first operation; 0 for an append.
	Skip int64 `json:"skip"`
}

// Coordinate is the index of the last operation a job wrote in a stream.
type Coordinate struct {
	DocumentID string `json:"documentId"`
	Scope      string `json:"scope"`
	Branch     string `json:"branch"`
	Index      int64  `json:"index"`
}

// GetJob returns a job's status now, without waiting. A job id that cannot
// have a result is an error IsNotFound reports.
func (c *Client) GetJob(ctx context.Context, jobID string) (*JobStatus, error) {
	return c.getJob(ctx, jobID, 0)
}

func (c *Client) getJob(ctx context.Context, jobID string, wait time.Duration) (*JobStatus, error) {
	q := url.Values{}
	if wait > 0 {
		q.Set("wait", formatWait(wait))
	}
	var st JobStatus
	if err := c.do(ctx, request{api: ingestRead, method: http.MethodGet, path: idPath("/v1/jobs/", jobID, ""), query: q}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// WaitJob waits until the job has its result and returns its status:
// WRITE_READY (or READ_READY when the document view had applied it by
// then), or, for a job that FAILED, the status and a *JobFailedError
// carrying its error history. It long-polls the ingest API (?wait=
// JobPollWait per request) until then or until ctx ends, when it returns
// the last status seen (PENDING) with ctx's error.
func (c *Client) WaitJob(ctx context.Context, jobID string) (*JobStatus, error) {
	var last *JobStatus
	early := 0
	for {
		wait := c.cfg.JobPollWait
		if dl, ok := ctx.Deadline(); ok {
			// Ask for no more than the caller gives, so the last poll ends
			// with an answer rather than a cancelled request.
			if left := time.Until(dl); left < wait {
				wait = left.Truncate(time.Millisecond)
			}
		}
		if wait <= 0 {
			wait = time.Millisecond
		}
		start := time.Now()
		st, err := c.getJob(ctx, jobID, wait)
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = errors.Join(ctx.Err(), err)
			}
			return last, err
		}
		last = st
		switch st.Status {
		case StatusFailed:
			return st, &JobFailedError{JobID: st.JobID, ErrorHistory: st.ErrorHistory}
		case StatusPending:
			if err := ctx.Err(); err != nil {
				return st, err
			}
			// A server that answers PENDING at once (one stopping) is
			// polled with a backoff rather than in a tight loop. One that
			// held the poll for a while, if shorter than asked (its cap),
			// is polled again at once.
			if time.Since(start) < min(wait/2, time.Second) {
				early++
				if err := sleep(ctx, backoff.Exponential(c.cfg.BaseDelay, c.cfg.MaxDelay, early)); err != nil {
					return st, err
				}
			} else {
				early = 0
			}
			continue
		}
		return st, nil
	}
}
