package ingest

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/httpapi"
	oplog "github.com/doclog/doclog/log"
)

// jobStatusBody is the body of GET /v1/jobs/{id}.
type jobStatusBody struct {
	JobID            string                  `json:"jobId"`
	Status           oplog.JobStatus         `json:"status"`
	DocumentID       string                  `json:"documentId,omitempty"`
	Streams          []oplog.StreamRange     `json:"streams,omitempty"`
	ConsistencyToken *oplog.ConsistencyToken `json:"consistencyToken,omitempty"`
	ErrorHistory     *[]oplog.ErrorInfo      `json:"errorHistory,omitempty"`
	CompletedAt      *time.Time              `json:"completedAt,omitempty"`
}

// idVerdict is what a job id alone says about a job without a result.
type idVerdict int

const (
	idMalformed idVerdict = iota // never an id ingest or a producer could have used
	idExpired                    // a UUIDv7 older than the jobs topic's retention
	idPending                    // it may still get a result
)

// classifyID applies the rule for a job with no result (DESIGN §3): a job
// id is a UUID in canonical lowercase form (the record contract's), so
// anything else is malformed and 404. A UUIDv7 carries the time it was made;
// once that is older than the jobs topic's retention its record has expired
// unread and the job will never have a result, so 404. Any other well-formed
// id — a UUIDv7 within retention, the UUIDv5 of an Idempotency-Key, a
// direct producer's own UUID — may belong to a job still on the topic, so it
// is PENDING.
func classifyID(id string, retention time.Duration, now time.Time) idVerdict {
	if !canonicalUUID(id) {
		return idMalformed
	}
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || retention < 0 {
		return idPending
	}
	sec, nsec := u.Time().UnixTime()
	if now.Sub(time.Unix(sec, nsec)) > retention {
		return idExpired
	}
	return idPending
}

func canonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
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
	verdict := classifyID(id, h.cfg.JobsRetention, time.Now())
	if verdict == idMalformed {
		h.refuse(w, r, fieldError(http.StatusNotFound, CodeJobNotFound, "id", "%q is not a job id (a UUID in lowercase 8-4-4-4-12 form)", id))
		return
	}
	var (
		res   oplog.JobResult
		found bool
		err   error
	)
	if wait > 0 && verdict == idPending && !h.isClosing() {
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
		if verdict == idExpired {
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
		body.ConsistencyToken = &token
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
