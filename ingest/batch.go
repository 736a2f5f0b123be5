package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// batchBody is the body of POST /v1/jobs:batch. The jobs stay raw so that
// each is decoded, and refused, on its own.
type batchBody struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// batchJob is one job of a batch: POST /v1/jobs's body and the job's own
// idempotency key, which a batch cannot carry in a header.
type batchJob struct {
	jobBody
	IdempotencyKey *string `json:"idempotencyKey"`
}

// batchResult is one job's outcome, at its position in the request: the
// status a POST /v1/jobs of it alone would have been answered with, and
// that answer's body (Accepted for 202, the error otherwise).
type batchResult struct {
	Status   int         `json:"status"`
	Accepted *submitted  `json:"accepted,omitempty"`
	Error    *batchError `json:"error,omitempty"`
}

// batchError is an error body without the request id, which the
// response's header and the batch's log entries carry once.
type batchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// submitBatch is POST /v1/jobs:batch: up to MaxBatchJobs mutate jobs in
// one request, each validated, produced and answered as POST /v1/jobs would
// answer it alone, in one response of 200 listing the outcomes in request
// order. A refused job refuses no other; the valid ones are produced
// together, so the producer sends them in as few produce requests as their
// partitions allow, and the answer waits for every acknowledgement. Jobs of
// one document are produced, and so executed, in request order. Only the
// request as a whole can be refused (its content type, size, JSON, the
// number of jobs, an Idempotency-Key header), and then nothing is
// produced.
func (h *Handler) submitBatch(w http.ResponseWriter, r *http.Request) {
	if _, present := r.Header["Idempotency-Key"]; present {
		h.refuse(w, r, &APIError{Status: http.StatusBadRequest, Code: CodeInvalidField, Field: "Idempotency-Key",
			Message: "Idempotency-Key: a batch takes one key per job (jobs[i].idempotencyKey), not one for the request"})
		return
	}
	body, apiErr := readBody(r, h.cfg.MaxBatchBytes)
	var b batchBody
	if apiErr == nil {
		apiErr = decodeStrict(body, &b, "")
	}
	if apiErr == nil && mayHoldNull(body) {
		apiErr = membersOf(body).refuseNulls("")
	}
	if apiErr == nil {
		switch {
		case len(b.Jobs) == 0:
			apiErr = fieldError(http.StatusUnprocessableEntity, CodeInvalidField, "jobs", "required: a batch needs at least one job")
		case len(b.Jobs) > h.cfg.MaxBatchJobs:
			apiErr = fieldError(http.StatusRequestEntityTooLarge, CodeTooManyJobs, "jobs",
				"%d jobs, more than the %d a batch may have", len(b.Jobs), h.cfg.MaxBatchJobs)
		}
	}
	if apiErr != nil {
		h.refuse(w, r, apiErr)
		return
	}

	nowMs := time.Now().UnixMilli()
	results := make([]batchResult, len(b.Jobs))
	jobs := make([]*record.Job, len(b.Jobs))
	recs := make([]*kgo.Record, len(b.Jobs))
	for i, raw := range b.Jobs {
		field := "jobs[" + strconv.Itoa(i) + "]"
		job, rec, apiErr := h.prepareBatchJob(raw, field, nowMs)
		if apiErr != nil {
			h.logger.Debug("batch job refused", httpapi.RequestIDField(r), zap.Int("batch_index", i),
				zap.Int("status", apiErr.Status), zap.String("code", apiErr.Code), zap.String("message", apiErr.Message))
			results[i] = batchResult{Status: apiErr.Status, Error: &batchError{Code: apiErr.Code, Message: apiErr.Message, Field: apiErr.Field}}
			continue
		}
		jobs[i], recs[i] = job, rec
	}

	valid := 0
	for _, rec := range recs {
		if rec != nil {
			valid++
		}
	}
	if h.refusedForBacklog(w, r, valid) {
		return
	}
	// As for one job, a client that hangs up does not cancel the produce.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.ProduceTimeout)
	defer cancel()
	start := time.Now()
	for i, err := range h.produceAll(ctx, recs) {
		if recs[i] == nil {
			continue
		}
		h.settleReservation(jobs[i], err == nil)
		if err != nil {
			h.logJob(zap.ErrorLevel, "produce job", jobs[i], httpapi.RequestIDField(r), zap.Int("batch_index", i), zap.Error(err), zap.Duration("elapsed", time.Since(start)))
			e := produceError(err, jobs[i], recs[i])
			results[i] = batchResult{Status: e.Status, Error: &batchError{Code: e.Code, Message: e.Message}}
			continue
		}
		h.logJob(zap.DebugLevel, "job accepted", jobs[i], zap.Int("batch_index", i), zap.Int("actions", len(jobs[i].Actions)), zap.Duration("elapsed", time.Since(start)))
		acc := accepted(jobs[i])
		results[i] = batchResult{Status: http.StatusAccepted, Accepted: &acc}
	}
	writeJSON(w, http.StatusOK, struct {
		Results []batchResult `json:"results"`
	}{results})
}

// prepareBatchJob decodes, validates and encodes one job of a batch; its
// errors name their field under field (jobs[3].actions[0].type).
func (h *Handler) prepareBatchJob(raw json.RawMessage, field string, nowMs int64) (*record.Job, *kgo.Record, *APIError) {
	if int64(len(raw)) > h.cfg.MaxBodyBytes {
		return nil, nil, fieldError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, field,
			"%d bytes, more than the %d a job's body may have", len(raw), h.cfg.MaxBodyBytes)
	}
	var b batchJob
	if e := decodeStrict(raw, &b, field); e != nil {
		return nil, nil, e
	}
	if mayHoldNull(raw) {
		if e := membersOf(raw).refuseNulls(field, "meta"); e != nil {
			return nil, nil, e
		}
	}
	id, e := batchJobID(b.IdempotencyKey, field)
	if e != nil {
		return nil, nil, e
	}
	job, rec, e := h.prepare(&submission{
		kind: record.KindMutate, nowMs: nowMs, documentID: b.DocumentID, documentType: b.DocumentType, branch: b.Branch,
		actions: b.Actions, queueHint: b.QueueHint, maxRetries: b.MaxRetries, meta: b.Meta,
	}, id)
	if e != nil {
		return nil, nil, underField(e, field)
	}
	return job, rec, nil
}

// batchJobID is jobID's rule for one job of a batch, its key a member of
// the job rather than a header.
func batchJobID(key *string, field string) (string, *APIError) {
	if key == nil {
		return newJobID()
	}
	if *key == "" || len(*key) > maxIdempotencyKey {
		return "", fieldError(http.StatusBadRequest, CodeInvalidField, field+".idempotencyKey", "must be 1 to %d bytes", maxIdempotencyKey)
	}
	return model.JobIDFromIdempotencyKey(*key), nil
}

// underField moves an error about a job's field under the job's path in
// the batch: its field and the message that leads with it.
func underField(e *APIError, field string) *APIError {
	out := *e
	if e.Field == "" {
		out.Field, out.Message = field, field+": "+e.Message
		return &out
	}
	out.Field = field + "." + e.Field
	out.Message = field + "." + e.Message
	if !strings.HasPrefix(e.Message, e.Field+": ") {
		out.Message = out.Field + ": " + e.Message
	}
	return &out
}

// produceAll produces every record that is not nil at once and waits for
// their acknowledgements until ctx ends; the error of record i is at i.
// Each promise has a buffered channel of its own, so a late promise never
// blocks the producer.
func (h *Handler) produceAll(ctx context.Context, recs []*kgo.Record) []error {
	acked := make([]chan error, len(recs))
	start := time.Now()
	for i, rec := range recs {
		if rec == nil {
			continue
		}
		acked[i] = make(chan error, 1)
		h.producer.Produce(ctx, rec, func(_ *kgo.Record, err error) { acked[i] <- err })
	}
	errs := make([]error, len(recs))
	for i, ch := range acked {
		if ch == nil {
			continue
		}
		select {
		case errs[i] = <-ch:
			h.produced.Observe(time.Since(start).Seconds())
		case <-ctx.Done():
			errs[i] = fmt.Errorf("wait for the broker's acknowledgement: %w", context.Cause(ctx))
		}
	}
	return errs
}
