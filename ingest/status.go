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

// JobStatus is a job's status as GET /v1/jobs/{id} answers it (and doclogctl
// jobs get prints it). A WRITE_READY job's ConsistencyToken is the wire form
// the read store takes as it is (oplog.EncodeToken); Coordinates are what it
// encodes, for clients that want to look inside.
type JobStatus struct {
	JobID            string              `json:"jobId"`
	Status           oplog.JobStatus     `json:"status"`
	DocumentID       string              `json:"documentId,omitempty"`
	Streams          []oplog.StreamRange `json:"streams,omitempty"`
	ConsistencyToken string              `json:"consistencyToken,omitempty"`
	Coordinates      *[]oplog.Coordinate `json:"coordinates,omitempty"`
	ErrorHistory     *[]oplog.ErrorInfo  `json:"errorHistory,omitempty"`
	// Load is what a WRITE_READY load job's placement did in each stream:
	// how many of its operations were stored, were replays or were
	// superseded by the origin's own skips, and how many stored operations
	// a merge reshuffled, with its skip. Absent for any other job.
	Load        *oplog.LoadSummary `json:"load,omitempty"`
	CompletedAt *time.Time         `json:"completedAt,omitempty"`
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
		writeJSON(w, http.StatusOK, JobStatus{JobID: id, Status: oplog.JobPending})
		return
	}
	writeJSON(w, http.StatusOK, h.statusOf(r.Context(), &res))
}

// StatusOf reports a stored result as it stands in the log: WRITE_READY
// with its ranges and token, FAILED with its errors. Results are written
// once and never change.
func StatusOf(res *oplog.JobResult) JobStatus {
	body := JobStatus{JobID: res.JobID, Status: res.Status, DocumentID: res.DocumentID}
	if !res.CreatedAt.IsZero() {
		t := res.CreatedAt.UTC()
		body.CompletedAt = &t
	}
	switch res.Status {
	case oplog.JobWriteReady:
		body.Streams = res.Streams
		body.Load = res.Load
		coords := res.Token.Coordinates
		if coords == nil {
			coords = []oplog.Coordinate{}
		}
		body.ConsistencyToken = oplog.EncodeToken(oplog.ConsistencyToken{Coordinates: coords})
		body.Coordinates = &coords
	case oplog.JobFailed:
		hist := res.ErrorHistory
		if hist == nil {
			hist = []oplog.ErrorInfo{}
		}
		body.ErrorHistory = &hist
	}
	return body
}

// statusOf reports a stored result, READ_READY once the document view has
// reached a WRITE_READY job's token. READ_READY only ever follows
// WRITE_READY, so what a client sees never regresses.
func (h *Handler) statusOf(ctx context.Context, res *oplog.JobResult) JobStatus {
	body := StatusOf(res)
	if res.Status == oplog.JobWriteReady && h.readReady != nil {
		ok, err := h.readReady.ReadReady(ctx, oplog.ConsistencyToken{Coordinates: *body.Coordinates})
		switch {
		case err != nil:
			h.logger.Warn("check whether the document view reached a job", zap.String("job_id", res.JobID), zap.Error(err))
		case ok:
			body.Status = oplog.JobReadReady
		}
	}
	return body
}
