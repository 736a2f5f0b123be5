package ingest

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
	"github.com/doclog/doclog/signing"
)

// SignatureVerifier checks the signatures of a job's actions under its
// document type's policy (package signing's Verifier).
type SignatureVerifier interface {
	VerifyJob(j *record.Job) error
}

// checkSignatures refuses a job the executors would fail as
// SIGNATURE_INVALID, with 400 signature_invalid naming the field as the
// client sent it: the record's actions start with a create's name and slug,
// which the client sent as fields of their own.
func (h *Handler) checkSignatures(job *record.Job, s *submission) *APIError {
	if h.verifier == nil {
		return nil
	}
	err := h.verifier.VerifyJob(job)
	if err == nil {
		return nil
	}
	var se *signing.Error
	if !errors.As(err, &se) {
		return fieldError(http.StatusBadRequest, CodeSignatureInvalid, "actions", "%s", err)
	}
	if se.Loaded {
		return fieldError(http.StatusBadRequest, CodeSignatureInvalid, se.Field(), "signature %s: %s", se.Reason, se.Detail)
	}
	if se.Index < len(s.pre) {
		field := "slug"
		if s.pre[se.Index].Type == model.ActionSetName {
			field = "name"
		}
		return fieldError(http.StatusBadRequest, CodeSignatureInvalid, field,
			"document type %s requires signed actions, and a %s given here becomes an unsigned %s action: send it as a signed action of the job instead",
			job.DocumentType, field, s.pre[se.Index].Type)
	}
	// The signing package names fields by the record's index; the client's
	// index leaves the name and slug out.
	n := se.Index - len(s.pre)
	field := "actions[" + strconv.Itoa(n) + "]" + strings.TrimPrefix(se.Field(), "actions["+strconv.Itoa(se.Index)+"]")
	msg := "signature " + string(se.Reason) + ": " + se.Detail
	m := membersOf(s.actions[n])
	if _, id := m["id"]; se.Reason == signing.ReasonMismatch && (!id || m["timestampUtcMs"] == nil) {
		msg += " (the action names no id or no timestampUtcMs, which ingest then picks; a signature covers both, so a signed action names them)"
	}
	return fieldError(http.StatusBadRequest, CodeSignatureInvalid, field, "%s", msg)
}
