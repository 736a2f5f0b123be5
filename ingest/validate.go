package ingest

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/doclog/doclog/internal/jsonvalue"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// submission is a request reduced to what every submit endpoint shares.
type submission struct {
	kind record.Kind
	// nowMs is when the request arrived: the job's submittedAtUtcMs and
	// the timestamp of every action that names none.
	nowMs        int64
	documentID   string
	documentType string
	branch       *string
	// pre are actions the endpoint adds before the client's (a create's
	// name and slug), already validated.
	pre        []oplog.Action
	actions    []json.RawMessage
	queueHint  []string
	maxRetries *int
	meta       json.RawMessage
	// operations are a load job's (kind load), raw.
	operations []json.RawMessage
	// fork and promote are a branch job's own fields (branches.go).
	fork    *record.Fork
	promote *record.Promote
}

// validator checks submissions against the model registry and the limits.
type validator struct {
	registry   *model.Registry
	cfg        Config
	system     map[string]*model.ActionSpec
	systemList []string
}

func newValidator(reg *model.Registry, cfg Config) *validator {
	v := &validator{registry: reg, cfg: cfg, system: map[string]*model.ActionSpec{}}
	for _, a := range model.SystemActions() {
		v.system[a.Type] = a
		if usableInJobs(a.Type) {
			v.systemList = append(v.systemList, a.Type)
		}
	}
	return v
}

// usableInJobs reports whether a client may send a system action itself:
// create and delete have their own endpoints, because the job's kind (and
// with it the executor's handling) follows from them.
func usableInJobs(actionType string) bool {
	return actionType != model.ActionCreateDocument && actionType != model.ActionDeleteDocument
}

// ActionID is the id ingest gives the n-th action (0-based, counting every
// action of the job record) of a job when the client sent none. It is derived
// rather than random so that a retry with the same Idempotency-Key carries
// the same action ids.
func ActionID(jobID string, n int) string { return jobID + ":" + strconv.Itoa(n) }

// DocumentIDFromJob is the document id a create gets when the client names
// none: a UUIDv7 without an Idempotency-Key, and with one a UUIDv5 in the URL
// namespace of "urn:doclog:document:<jobId>", so that a retry creates (and
// answers with) the same document.
func DocumentIDFromJob(jobID string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("urn:doclog:document:"+jobID)).String()
}

// build validates a submission and turns it into a job.
func (v *validator) build(s *submission, jobID string) (*record.Job, *APIError) {
	nowMs := s.nowMs
	unprocessable := func(code, field, format string, args ...any) *APIError {
		return fieldError(http.StatusUnprocessableEntity, code, field, format, args...)
	}
	if e := checkNames(s); e != nil {
		return nil, e
	}
	if s.documentID == "" {
		return nil, unprocessable(CodeInvalidField, "documentId", "required")
	}
	if s.documentType == "" {
		return nil, unprocessable(CodeInvalidField, "documentType", "required")
	}
	m, err := v.registry.Latest(s.documentType)
	if err != nil {
		return nil, unprocessable(CodeUnknownDocumentType, "documentType", "%q is not a registered document type (known: %s)",
			s.documentType, strings.Join(v.registry.Types(), ", "))
	}
	if s.branch != nil && *s.branch == "" {
		return nil, unprocessable(CodeInvalidField, "branch", "empty; leave it out for main")
	}
	total := len(s.pre) + len(s.actions)
	if total > v.cfg.MaxActionsPerJob {
		return nil, fieldError(http.StatusRequestEntityTooLarge, CodeTooManyActions, "actions",
			"%d actions, more than the %d a job may have", total, v.cfg.MaxActionsPerJob)
	}
	if s.kind == record.KindLoad {
		return v.buildLoad(s, m, jobID)
	}
	if s.kind == record.KindMutate && total == 0 {
		return nil, unprocessable(CodeInvalidField, "actions", "required: a job needs at least one action")
	}
	j := &record.Job{
		JobID:            jobID,
		Kind:             s.kind,
		DocumentID:       s.documentID,
		DocumentType:     s.documentType,
		Branch:           oplog.DefaultBranch,
		Actions:          make([]oplog.Action, 0, total),
		QueueHint:        s.queueHint,
		MaxRetries:       s.maxRetries,
		Meta:             jsonvalue.NullAsAbsent(s.meta),
		SubmittedAtUtcMs: nowMs,
		Fork:             s.fork,
		Promote:          s.promote,
	}
	if s.branch != nil {
		j.Branch = *s.branch
	}
	if len(j.Meta) > 0 && !isObject(j.Meta) {
		return nil, unprocessable(CodeInvalidField, "meta", "must be a JSON object")
	}
	for _, a := range s.pre {
		if a.ID == "" {
			a.ID = ActionID(jobID, len(j.Actions))
		}
		j.Actions = append(j.Actions, a)
	}
	for i, raw := range s.actions {
		a, apiErr := v.action(m, raw, "actions["+strconv.Itoa(i)+"]", jobID, len(j.Actions), nowMs, false)
		if apiErr != nil {
			return nil, apiErr
		}
		j.Actions = append(j.Actions, a)
	}
	return j, nil
}

// action decodes and validates one client action; n is its position in the
// job record, for a derived id.
func (v *validator) action(m model.Model, raw json.RawMessage, field, jobID string, n int, nowMs int64, loaded bool) (oplog.Action, *APIError) {
	unprocessable := func(code, f, format string, args ...any) *APIError {
		return fieldError(http.StatusUnprocessableEntity, code, f, format, args...)
	}
	var b actionBody
	if e := decodeStrict(raw, &b, field); e != nil {
		return oplog.Action{}, e
	}
	if mayHoldNull(raw) {
		if e := membersOf(raw).refuseNulls(field, "input", "context"); e != nil {
			return oplog.Action{}, e
		}
	}
	for _, f := range []struct{ name, v string }{{"id", b.ID}, {"type", b.Type}, {"scope", b.Scope}} {
		if e := checkText(field+"."+f.name, f.v); e != nil {
			return oplog.Action{}, e
		}
	}
	if b.Type == "" {
		return oplog.Action{}, unprocessable(CodeInvalidField, field+".type", "required")
	}
	if b.Scope == "" {
		return oplog.Action{}, unprocessable(CodeInvalidField, field+".scope", "required")
	}
	input := jsonvalue.NullAsAbsent(b.Input)
	if len(input) > v.cfg.MaxInputBytes {
		return oplog.Action{}, fieldError(http.StatusRequestEntityTooLarge, CodeInputTooLarge, field+".input",
			"%d bytes, more than the %d an action's input may have", len(input), v.cfg.MaxInputBytes)
	}
	ctx := jsonvalue.NullAsAbsent(b.Context)
	if len(ctx) > 0 && !isObject(ctx) {
		return oplog.Action{}, unprocessable(CodeInvalidField, field+".context", "must be a JSON object")
	}
	spec, ok := v.system[b.Type]
	switch {
	case ok && !usableInJobs(b.Type) && !loaded: // a load carries them as its origin stored them
		endpoint := "POST /v1/documents"
		if b.Type == model.ActionDeleteDocument {
			endpoint = "DELETE /v1/documents/{id}"
		}
		return oplog.Action{}, unprocessable(CodeUnknownAction, field+".type", "%s is not sent as an action; use %s", b.Type, endpoint)
	case !ok:
		spec, ok = m.Action(b.Type)
		if !ok {
			return oplog.Action{}, unprocessable(CodeUnknownAction, field+".type", "%q is not an action of %s v%d (it declares %s; the document scope takes %s)",
				b.Type, m.Type(), m.Version(), strings.Join(actionTypes(m), ", "), strings.Join(v.systemList, ", "))
		}
	}
	if !spec.AllowsScope(b.Scope) {
		return oplog.Action{}, unprocessable(CodeInvalidScope, field+".scope", "%s applies to scope %s, not %q",
			b.Type, strings.Join(spec.Scopes, " or "), b.Scope)
	}
	if _, err := spec.Validate(input); err != nil {
		return oplog.Action{}, inputError(field+".input", err)
	}
	a := oplog.Action{ID: b.ID, Type: b.Type, Scope: b.Scope, TimestampUtcMs: nowMs, Input: input, Context: ctx, Signature: b.Signature}
	if a.ID == "" {
		a.ID = ActionID(jobID, n)
	}
	if b.TimestampUtcMs != nil {
		if *b.TimestampUtcMs < 0 {
			return oplog.Action{}, unprocessable(CodeInvalidField, field+".timestampUtcMs", "must not be negative")
		}
		a.TimestampUtcMs = *b.TimestampUtcMs
	}
	return a, nil
}

func actionTypes(m model.Model) []string {
	out := make([]string, 0, len(m.Actions()))
	for _, a := range m.Actions() {
		out = append(out, a.Type)
	}
	return out
}

// inputFieldReason matches the model SDK's message for an input field of the
// wrong JSON type, so the error can name the field itself.
var inputFieldReason = regexp.MustCompile(`^field "([^"]+)" must be (.+)$`)

// inputError turns a model's refusal of an input into an API error naming
// the input field where the model's message allows it.
func inputError(field string, err error) *APIError {
	var ii *model.InvalidInput
	if e := unsafeInput(field, err); e != nil {
		return e
	}
	if !errors.As(err, &ii) {
		return fieldError(http.StatusUnprocessableEntity, CodeInvalidInput, field, "%s", err.Error())
	}
	if m := inputFieldReason.FindStringSubmatch(ii.Reason); m != nil {
		return fieldError(http.StatusUnprocessableEntity, CodeInvalidInput, field+"."+m[1], "must be %s", m[2])
	}
	return fieldError(http.StatusUnprocessableEntity, CodeInvalidInput, field, "%s", ii.Reason)
}

// systemInput validates the input of a system action the endpoint builds
// itself (a create's name and slug) and reports errors under field.
func (v *validator) systemInput(actionType, field string, input any) (json.RawMessage, *APIError) {
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, fieldError(http.StatusUnprocessableEntity, CodeInvalidField, field, "%s", err.Error())
	}
	if _, err := v.system[actionType].Validate(raw); err != nil {
		var ii *model.InvalidInput
		var ut *oplog.UnsafeTextError
		if errors.As(err, &ut) {
			return nil, fieldError(http.StatusBadRequest, CodeInvalidField, field, "%s", ut)
		}
		if errors.As(err, &ii) {
			return nil, fieldError(http.StatusUnprocessableEntity, CodeInvalidInput, field, "%s", ii.Reason)
		}
		return nil, fieldError(http.StatusUnprocessableEntity, CodeInvalidInput, field, "%s", err.Error())
	}
	return raw, nil
}

// recordError maps the record contract's refusal of a job.
func recordError(err error) *APIError {
	var ve *record.ValidationError
	if !errors.As(err, &ve) {
		return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeInvalidField, Message: err.Error()}
	}
	if ve.Type == record.ErrRecordTooLarge {
		return fieldError(http.StatusRequestEntityTooLarge, CodeRecordTooLarge, ve.Field, "%s", ve.Reason)
	}
	return fieldError(http.StatusUnprocessableEntity, CodeInvalidField, ve.Field, "%s", ve.Reason)
}

// checkNames refuses a submission whose names (the document's id, type and
// branch, the job ids it waits for) hold text the record contract refuses,
// before anything else reads them: the client learns the real fault, and
// no registry message or log line carries the characters.
func checkNames(s *submission) *APIError {
	fields := []struct{ name, v string }{{"documentId", s.documentID}, {"documentType", s.documentType}}
	if s.branch != nil {
		fields = append(fields, struct{ name, v string }{"branch", *s.branch})
	}
	for i, id := range s.queueHint {
		fields = append(fields, struct{ name, v string }{"queueHint[" + strconv.Itoa(i) + "]", id})
	}
	for _, f := range fields {
		if e := checkText(f.name, f.v); e != nil {
			return e
		}
	}
	return nil
}

// checkText refuses a name in text oplog.CheckText refuses: 400, like any
// request whose text is malformed, whatever the registry says.
func checkText(field, s string) *APIError {
	if err := oplog.CheckText(s); err != nil {
		return fieldError(http.StatusBadRequest, CodeInvalidField, field, "%s", err)
	}
	return nil
}

// unsafeInput maps a model's refusal of a name in an action's input (a
// document name, a relationship's target) for the text it holds to the
// answer checkText gives; nil for any other refusal.
func unsafeInput(field string, err error) *APIError {
	var ut *oplog.UnsafeTextError
	var ii *model.InvalidInput
	if !errors.As(err, &ut) || !errors.As(err, &ii) || ii.Field == "" {
		return nil
	}
	return fieldError(http.StatusBadRequest, CodeInvalidField, field+"."+ii.Field, "%s", ut)
}
