package ingest

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/httpapi"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

// jobStatusBody is the body of GET /v1/jobs/{id}. A WRITE_READY job's
// ConsistencyToken is the wire form the read store takes as it is
// (oplog.EncodeToken); Coordinates are what it encodes, for clients that
// want to look inside.
type jobStatusBody struct {
	JobID            string              `json:"jobId"`
	Status           oplog.JobStatus     `json:"status"`
	DocumentID       string              `json:"documentId,omitempty"`
	Streams          []oplog.StreamRange `json:"streams,omitempty"`
	ConsistencyToken string              `json:"consistencyToken,omitempty"`
	Coordinates      *[]oplog.Coordinate `json:"coordinates,omitempty"`
	ErrorHistory     *[]oplog.ErrorInfo  `json:"errorHistory,omitempty"`
	CompletedAt      *time.Time          `json:"completedAt,omitempty"`
}

// parseWait reads ?wait= (httpapi.ParseWait), capped at max; 0 when absent.
func parseWait(q url.Values, max time.Duration) (time.Duration, *APIError) {
	if !q.Has("wait") {
		return 0, nil
	}
	d, err := httpapi.ParseWait(q.Get("wait"), max)
	if err != nil {
		return 0, fieldError(http.StatusBadRequest, CodeInvalidField, "wait", "%s", err)
	}
	return d, nil
}

// jobStatus answers GET /v1/jobs/{id}[?wait=]. With a wait, the request
// joins the shared poller and is answered as soon as the job has a result,
// or with its status at the end of the wait.
func (h *Handler) jobStatus(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for name := range r.URL.Query() {
		if name != "wait" {
			h.refuse(w, r, fieldError(http.StatusBadRequest, CodeInvalidField, name, "unknown query parameter (known: wait)"))
			return
		}
	}
	wait, apiErr := parseWait(r.URL.Query(), h.cfg.MaxWait)
	if apiErr != nil {
		h.refuse(w, r, apiErr)
		return
	}
	verdict := record.ClassifyUnresolved(id, h.cfg.JobsRetention, time.Now())
	if verdict == record.MalformedJobID {
		h.refuse(w, r, fieldError(http.StatusNotFound, CodeJobNotFound, "id", "%q is not a job id (a UUID in lowercase 8-4-4-4-12 form)", id))
		return
	}
	var (
		res   oplog.JobResult
		found bool
		err   error
	)
	if wait > 0 && verdict == record.PendingJobID && !h.isClosing() {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		res, found, err = h.poller.wait(ctx, id)
		cancel()
	} else {
		var results map[string]oplog.JobResult
		results, err = h.results.JobResults(r.Context(), []string{id})
		res, found = results[id]
	}
	if err != nil && !found {
		h.logger.Warn("look up job result", httpapi.RequestIDField(r), zap.String("job_id", id), zap.Error(err))
		writeError(w, &APIError{Status: http.StatusServiceUnavailable, Code: CodeResultsUnavailable,
			Message: "the job results could not be read; try again"})
		return
	}
	if !found {
		if verdict == record.ExpiredJobID {
			h.refuse(w, r, fieldError(http.StatusNotFound, CodeJobNotFound, "id",
				"job %s has no result and was submitted more than %s ago, past the jobs topic's retention", id, h.cfg.JobsRetention))
			return
		}
		writeJSON(w, http.StatusOK, jobStatusBody{JobID: id, Status: oplog.JobPending})
		return
	}
	writeJSON(w, http.StatusOK, h.statusOf(r.Context(), &res))
}

// statusOf reports a stored result. Results are written once and never
// change, and READ_READY only ever follows WRITE_READY, so what a client sees
// never regresses.
func (h *Handler) statusOf(ctx context.Context, res *oplog.JobResult) jobStatusBody {
	body := jobStatusBody{JobID: res.JobID, Status: res.Status, DocumentID: res.DocumentID}
	if !res.CreatedAt.IsZero() {
		t := res.CreatedAt.UTC()
		body.CompletedAt = &t
	}
	switch res.Status {
	case oplog.JobWriteReady:
		body.Streams = res.Streams
		token := res.Token
		if token.Coordinates == nil {
			token.Coordinates = []oplog.Coordinate{}
		}
		body.ConsistencyToken = oplog.EncodeToken(token)
		body.Coordinates = &token.Coordinates
		if h.readReady != nil {
			ok, err := h.readReady.ReadReady(ctx, token)
			switch {
			case err != nil:
				h.logger.Warn("check whether the document view reached a job", zap.String("job_id", res.JobID), zap.Error(err))
			case ok:
				body.Status = oplog.JobReadReady
			}
		}
	case oplog.JobFailed:
		hist := res.ErrorHistory
		if hist == nil {
			hist = []oplog.ErrorInfo{}
		}
		body.ErrorHistory = &hist
	}
	return body
}
