package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// BatchJob is one job of SubmitJobs: a mutate job and its idempotency key.
type BatchJob struct {
	Job
	// IdempotencyKey is the job's key, as WithIdempotencyKey gives one to
	// SubmitJob; empty: the client generates one for the call, reused on
	// every retry of the job.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// BatchResult is the outcome of one job of SubmitJobs.
type BatchResult struct {
	// Accepted is the job's acceptance (its IdempotencyKey set), nil when
	// the job was refused.
	Accepted *Accepted
	// Err is why the job was refused: an *APIError with the status and
	// code a SubmitJob of it would have had, its field under the job's
	// place in the batch (jobs[3].actions[0].type). Nil when accepted.
	Err error
}

// SubmitJobs submits several mutate jobs in one request (POST
// /v1/jobs:batch; the server takes up to 1,000 by default): one HTTP
// request and one wait for the broker instead of one per job. It returns
// one result per job, in order, once every job was acknowledged or
// refused; jobs of one document run in the order given. A job refused for
// a reason worth retrying (503, 429) is sent again, alone with the others
// so refused, under the same key, within the client's MaxAttempts and
// backoff; a job refused for good is not. The error is for the request as
// a whole (no job was submitted by the failed attempt, but an earlier
// attempt's jobs were: their keys make submitting them again harmless).
func (c *Client) SubmitJobs(ctx context.Context, jobs []BatchJob) ([]BatchResult, error) {
	wire := make([]BatchJob, len(jobs))
	for i, j := range jobs {
		if j.Actions == nil {
			j.Actions = []Action{} // as SubmitJob: the server names the field
		}
		if j.IdempotencyKey == "" {
			j.IdempotencyKey = uuid.NewString()
		}
		wire[i] = j
	}
	results := make([]BatchResult, len(jobs))
	pending := make([]int, len(jobs)) // indexes into jobs still to send
	for i := range pending {
		pending[i] = i
	}
	for attempt := 1; ; attempt++ {
		send := make([]BatchJob, len(pending))
		for n, i := range pending {
			send[n] = wire[i]
		}
		body, err := jsonBody(struct {
			Jobs []BatchJob `json:"jobs"`
		}{send})
		if err != nil {
			return nil, err
		}
		var answer batchAnswer
		if err := c.do(ctx, request{api: ingestWrite, method: http.MethodPost, path: "/v1/jobs:batch", body: body}, &answer); err != nil {
			return nil, err
		}
		if len(answer.Results) != len(pending) {
			return nil, fmt.Errorf("POST /v1/jobs:batch: %d results for %d jobs", len(answer.Results), len(pending))
		}
		var retry []int
		var lastErr error
		for n, i := range pending {
			r := answer.Results[n]
			if r.Status == http.StatusAccepted && r.Accepted != nil {
				acc := *r.Accepted
				acc.IdempotencyKey = wire[i].IdempotencyKey
				results[i] = BatchResult{Accepted: &acc}
				continue
			}
			e := &APIError{StatusCode: r.Status, Method: http.MethodPost, URL: "/v1/jobs:batch"}
			if r.Error != nil {
				// A retry's positions are not the caller's: name the job
				// by its place in jobs.
				sent, own := "jobs["+strconv.Itoa(n)+"]", "jobs["+strconv.Itoa(i)+"]"
				e.Code = r.Error.Code
				e.Field = own + strings.TrimPrefix(r.Error.Field, sent)
				e.Message = own + strings.TrimPrefix(r.Error.Message, sent)
				if !strings.HasPrefix(r.Error.Message, sent) {
					e.Message = r.Error.Message
				}
				if !strings.HasPrefix(r.Error.Field, sent) {
					e.Field = r.Error.Field
				}
			}
			results[i] = BatchResult{Err: e}
			if retryableStatus(e) {
				retry, lastErr = append(retry, i), e
			}
		}
		if len(retry) == 0 || attempt >= c.cfg.MaxAttempts || ctx.Err() != nil {
			return results, nil
		}
		if err := sleep(ctx, c.delayFor(lastErr, attempt)); err != nil {
			return results, nil // the refusals stand as the last answer gave them
		}
		pending = retry
	}
}

// batchAnswer is the 200 of POST /v1/jobs:batch.
type batchAnswer struct {
	Results []struct {
		Status   int       `json:"status"`
		Accepted *Accepted `json:"accepted"`
		Error    *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	} `json:"results"`
}
