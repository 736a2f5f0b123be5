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
	keys := make([]string, len(jobs))
	encoded := make([][]byte, len(jobs))
	for i, j := range jobs {
		var err error
		if encoded[i], keys[i], err = encodeBatchJob(j); err != nil {
			return nil, err
		}
	}
	results := make([]BatchResult, len(jobs))
	pending := make([]int, len(jobs)) // indexes into jobs still to send
	for i := range pending {
		pending[i] = i
	}
	for attempt := 1; ; attempt++ {
		send := make([][]byte, len(pending))
		for n, i := range pending {
			send[n] = encoded[i]
		}
		// A retry's positions are not the caller's: name each job by its
		// place in jobs.
		answer, err := c.sendBatch(ctx, send, func(n int) string { return "jobs[" + strconv.Itoa(pending[n]) + "]" })
		if err != nil {
			return nil, err
		}
		var retry []int
		var lastErr error
		for n, i := range pending {
			r := answer[n]
			if r.Accepted != nil {
				r.Accepted.IdempotencyKey = keys[i]
			}
			results[i] = r
			if e := r.retryable(); e != nil {
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

// retryable is the refusal of a job worth sending again (429, 503), nil
// for an acceptance or a refusal for good.
func (r BatchResult) retryable() *APIError {
	if e := AsAPIError(r.Err); e != nil && retryableStatus(e) {
		return e
	}
	return nil
}

// encodeBatchJob encodes one job of a batch, with its key: the caller's,
// or one generated now and kept for every retry of the job.
func encodeBatchJob(j BatchJob) (encoded []byte, key string, err error) {
	if j.Actions == nil {
		j.Actions = []Action{} // as SubmitJob: the server names the field
	}
	if j.IdempotencyKey == "" {
		j.IdempotencyKey = uuid.NewString()
	}
	encoded, err = jsonBody(j)
	return encoded, j.IdempotencyKey, err
}

// sendBatch sends the encoded jobs in one POST /v1/jobs:batch, retried as
// any request is, and returns one result per job. A refusal names the job
// by name(n) where the server named it by its place in the request
// (jobs[n]); a name of "" drops that prefix (actions[0].type, as POST
// /v1/jobs of the job alone would have named it).
func (c *Client) sendBatch(ctx context.Context, encoded [][]byte, name func(n int) string) ([]BatchResult, error) {
	size := len(`{"jobs":[]}`) + len(encoded)
	for _, e := range encoded {
		size += len(e)
	}
	body := make([]byte, 0, size)
	body = append(body, `{"jobs":[`...)
	for n, e := range encoded {
		if n > 0 {
			body = append(body, ',')
		}
		body = append(body, e...)
	}
	body = append(body, "]}"...)
	var answer batchAnswer
	if err := c.do(ctx, request{api: ingestWrite, method: http.MethodPost, path: "/v1/jobs:batch", body: body}, &answer); err != nil {
		return nil, err
	}
	if len(answer.Results) != len(encoded) {
		return nil, fmt.Errorf("POST /v1/jobs:batch: %d results for %d jobs", len(answer.Results), len(encoded))
	}
	results := make([]BatchResult, len(encoded))
	for n, r := range answer.Results {
		if r.Status == http.StatusAccepted && r.Accepted != nil {
			acc := *r.Accepted
			results[n] = BatchResult{Accepted: &acc}
			continue
		}
		e := &APIError{StatusCode: r.Status, Method: http.MethodPost, URL: "/v1/jobs:batch"}
		if r.Error != nil {
			sent, own := "jobs["+strconv.Itoa(n)+"]", name(n)
			e.Code = r.Error.Code
			e.Field = renameJob(r.Error.Field, sent, own)
			e.Message = renameJob(r.Error.Message, sent, own)
		}
		results[n] = BatchResult{Err: e}
	}
	return results, nil
}

// renameJob replaces the prefix sent (jobs[3]) of a refusal's field or
// message with own, or drops it when own is empty: "jobs[3].actions[0]"
// becomes "actions[0]", and "jobs[3]: ..." becomes "job: ...".
func renameJob(s, sent, own string) string {
	rest, ok := strings.CutPrefix(s, sent)
	if !ok {
		return s
	}
	if own != "" {
		return own + rest
	}
	if r, ok := strings.CutPrefix(rest, "."); ok {
		return r
	}
	if rest == "" {
		return ""
	}
	return "job" + rest
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
