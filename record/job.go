package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/internal/jsonvalue"
	oplog "github.com/doclog/doclog/log"
)

// Kind is what a job does to its document.
type Kind string

const (
	// KindCreate creates the document; it fails if the document exists.
	KindCreate Kind = "create"
	// KindMutate applies actions to an existing document.
	KindMutate Kind = "mutate"
	// KindDelete deletes the document.
	KindDelete Kind = "delete"
)

// Bounds on a job's fields, mirrored in docs/schemas/job.v1.schema.json.
// Lengths count Unicode code points, as JSON Schema's maxLength does.
const (
	MaxNameLength  = 256  // ids, document types, branches, action types and scopes
	MaxRetriesCap  = 1000 // the largest maxRetries a job may ask for
	MaxQueueHint   = 64   // jobs one job may wait for
	DefaultMaxSize = 1 << 20
)

// Job is one request to change one document: its actions are applied all or
// nothing, in order, possibly across several scopes of the document.
type Job struct {
	// JobID is the job's identity: a UUID in canonical lowercase form.
	// Ingest assigns a UUIDv7, or a UUIDv5 derived from an Idempotency-Key;
	// a direct producer picks its own, and resubmitting the same id is the
	// same job.
	JobID string
	Kind  Kind
	// DocumentID is also the record key, so all jobs of a document share a
	// partition and keep their order.
	DocumentID   string
	DocumentType string
	// Branch defaults to main when empty.
	Branch string
	// Actions each name their scope. A mutate job has at least one; create
	// and delete may have none, since the executor writes their system
	// action. A load job has none.
	Actions []oplog.Action
	// Operations are a load job's operations (KindLoad), and only its.
	Operations []LoadOperation
	// QueueHint lists job ids that must be WRITE_READY before this job
	// runs; a failed one fails this job.
	QueueHint []string
	// MaxRetries caps the attempts after transient errors; nil means the
	// executor's default. Conflicts and unavailability never count.
	MaxRetries *int
	// Meta is an optional JSON object carried along for the producer's own
	// use (a trace id, a user); doclog does not interpret it.
	Meta json.RawMessage
	// SubmittedAtUtcMs is when the producer submitted the job, for latency
	// metrics; 0 when unknown (the record timestamp is used then).
	SubmittedAtUtcMs int64
	// Fork and Promote are the fork and promote jobs' own fields
	// (branchjob.go); nil for every other kind.
	Fork    *Fork
	Promote *Promote
}

// OperationCount is about how many operations the job writes: its actions,
// or a load job's operations; a job of neither (a creation or deletion
// without actions, a branch job) writes about one. The executor bounds a
// batch by it and ingest weighs the backlog by it.
func (j *Job) OperationCount() int {
	return max(1, len(j.Actions)+len(j.Operations))
}

// BranchOrDefault returns the job's branch, main when empty.
func (j *Job) BranchOrDefault() string {
	if j.Branch == "" {
		return oplog.DefaultBranch
	}
	return j.Branch
}

// Validate checks the job against the doclog.job.v1 contract. It returns a
// *ValidationError naming the first offending field.
func (j *Job) Validate() error { return j.validate(true) }

// validate skips re-scanning raw JSON (input, context, meta) when checkRaw is
// false: after decoding, encoding/json has already proved it valid.
func (j *Job) validate(checkRaw bool) error {
	bad := func(field string, t ErrorType, format string, args ...any) error {
		return &ValidationError{Schema: SchemaJobV1, Field: field, Reason: fmt.Sprintf(format, args...), Type: t}
	}
	if err := checkUUID(j.JobID); err != "" {
		return bad("jobId", ErrDecode, "%s", err)
	}
	switch j.Kind {
	case KindCreate, KindMutate, KindDelete, KindLoad, KindFork, KindPromote, KindDeleteBranch:
	case "":
		return bad("kind", ErrDecode, "missing")
	default:
		return bad("kind", ErrDecode, "%q is not one of create, mutate, delete, load, fork, promote, delete-branch", j.Kind)
	}
	for _, f := range []struct{ name, v string }{
		{"documentId", j.DocumentID}, {"documentType", j.DocumentType}, {"branch", j.BranchOrDefault()},
	} {
		if err := checkName(f.v); err != "" {
			return bad(f.name, ErrDecode, "%s", err)
		}
	}
	if err := j.validateBranch(bad); err != nil {
		return err
	}
	if j.Kind == KindMutate && len(j.Actions) == 0 {
		return bad("actions", ErrInvalidAction, "a mutate job needs at least one action")
	}
	for i := range j.Actions {
		a := &j.Actions[i]
		field := "actions[" + strconv.Itoa(i) + "]"
		if err := checkAction(field, a, checkRaw); err != nil {
			return err
		}
		for k := range i {
			if j.Actions[k].ID == a.ID {
				return bad(field+".id", ErrInvalidAction, "%q repeats the id of actions[%d]; action ids are unique", a.ID, k)
			}
		}
	}
	if err := j.validateLoad(checkRaw); err != nil {
		return err
	}
	if len(j.QueueHint) > MaxQueueHint {
		return bad("queueHint", ErrDecode, "%d job ids, more than the %d allowed", len(j.QueueHint), MaxQueueHint)
	}
	for i, id := range j.QueueHint {
		field := "queueHint[" + strconv.Itoa(i) + "]"
		if err := checkUUID(id); err != "" {
			return bad(field, ErrDecode, "%s", err)
		}
		if id == j.JobID {
			return bad(field, ErrDecode, "a job cannot wait for itself")
		}
		for k := range i {
			if j.QueueHint[k] == id {
				return bad(field, ErrDecode, "%s is listed twice", id)
			}
		}
	}
	if j.MaxRetries != nil && (*j.MaxRetries < 0 || *j.MaxRetries > MaxRetriesCap) {
		return bad("maxRetries", ErrDecode, "%d is outside 0..%d", *j.MaxRetries, MaxRetriesCap)
	}
	if len(j.Meta) > 0 && !isObject(j.Meta, checkRaw) {
		return bad("meta", ErrDecode, "not a JSON object")
	}
	if j.SubmittedAtUtcMs < 0 {
		return bad("submittedAtUtcMs", ErrDecode, "negative (%d)", j.SubmittedAtUtcMs)
	}
	return nil
}

// AppendJSON appends the job's doclog.job.v1 JSON to dst. It does not
// validate; NewJobRecord does.
func (j *Job) AppendJSON(dst []byte) []byte {
	b := appendStringField(append(dst, '{'), "schema", SchemaJobV1, true)
	b = appendStringField(b, "jobId", j.JobID, false)
	b = appendStringField(b, "kind", string(j.Kind), false)
	b = appendStringField(b, "documentId", j.DocumentID, false)
	b = appendStringField(b, "documentType", j.DocumentType, false)
	b = appendStringField(b, "branch", j.BranchOrDefault(), false)
	b = append(appendKey(b, "actions", false), '[')
	for i := range j.Actions {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAction(b, &j.Actions[i])
	}
	b = append(b, ']')
	b = j.appendLoadOperations(b)
	if len(j.QueueHint) > 0 {
		b = appendStrings(appendKey(b, "queueHint", false), j.QueueHint)
	}
	if j.MaxRetries != nil {
		b = appendIntField(b, "maxRetries", int64(*j.MaxRetries), false)
	}
	if len(j.Meta) > 0 {
		b = appendRaw(appendKey(b, "meta", false), j.Meta)
	}
	if j.SubmittedAtUtcMs != 0 {
		b = appendIntField(b, "submittedAtUtcMs", j.SubmittedAtUtcMs, false)
	}
	b = j.appendBranchJSON(b)
	return append(b, '}')
}

// sizeHint estimates the encoded size so one allocation usually suffices.
func (j *Job) sizeHint() int {
	n := 192 + len(j.JobID) + len(j.DocumentID) + len(j.DocumentType) + len(j.Branch) + len(j.Meta) + 40*len(j.QueueHint)
	if j.Fork != nil {
		n += 48 + len(j.Fork.Branch) + 32*len(j.Fork.At)
	}
	if j.Promote != nil {
		n += 48 + len(j.Promote.Onto) + 32*len(j.Promote.ExpectedTip)
	}
	for i := range j.Actions {
		a := &j.Actions[i]
		n += 80 + len(a.ID) + len(a.Type) + len(a.Scope) + len(a.Input) + len(a.Context)
		if a.Signature != nil {
			n += 48 + len(a.Signature.KeyID) + len(a.Signature.Algorithm) + len(a.Signature.Value)
		}
	}
	n += j.loadOperationsSize()
	return n + n/8
}

// MarshalJSON encodes the job as doclog.job.v1, so a job nested in another
// record (a dead letter) carries its own version.
func (j *Job) MarshalJSON() ([]byte, error) {
	return j.AppendJSON(make([]byte, 0, j.sizeHint())), nil
}

// UnmarshalJSON decodes doclog.job.v1 strictly, as ParseJob does.
func (j *Job) UnmarshalJSON(data []byte) error {
	parsed, err := parseJob(data)
	if err != nil {
		return err
	}
	*j = *parsed
	return nil
}

// NewJobRecord validates the job and builds its record for topic: key =
// documentId, the schema header, the JSON value.
func NewJobRecord(topic string, j *Job) (*kgo.Record, error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	value := j.AppendJSON(make([]byte, 0, j.sizeHint()))
	if len(value) > DefaultMaxSize {
		return nil, &ValidationError{Schema: SchemaJobV1, Reason: fmt.Sprintf("%d bytes encoded, more than the %d a job may have", len(value), DefaultMaxSize), Type: ErrRecordTooLarge}
	}
	return newRecord(topic, j.DocumentID, SchemaJobV1, value), nil
}

// jobWire is the JSON shape read from the topic. Pointers tell an absent
// field from a zero one where the contract cares.
type jobWire struct {
	Schema           string              `json:"schema"`
	JobID            string              `json:"jobId"`
	Kind             Kind                `json:"kind"`
	DocumentID       string              `json:"documentId"`
	DocumentType     string              `json:"documentType"`
	Branch           *string             `json:"branch"`
	Actions          []actionWire        `json:"actions"`
	Operations       []loadOperationWire `json:"operations"`
	QueueHint        []string            `json:"queueHint"`
	MaxRetries       *int                `json:"maxRetries"`
	Meta             json.RawMessage     `json:"meta"`
	SubmittedAtUtcMs int64               `json:"submittedAtUtcMs"`
	Fork             *Fork               `json:"fork"`
	Promote          *Promote            `json:"promote"`
}

type actionWire struct {
	ID             string           `json:"id"`
	Type           string           `json:"type"`
	Scope          string           `json:"scope"`
	TimestampUtcMs *int64           `json:"timestampUtcMs"`
	Input          json.RawMessage  `json:"input"`
	Context        json.RawMessage  `json:"context"`
	Signature      *oplog.Signature `json:"signature"`
}

// ParseJob decodes a job record's value strictly, without the record around
// it (no header or key check, default size bound); Decoder.Job does both.
func ParseJob(value []byte) (*Job, error) {
	if len(value) > DefaultMaxSize {
		return nil, tooLarge(SchemaJobV1, len(value), DefaultMaxSize)
	}
	return parseJob(value)
}

func parseJob(value []byte) (*Job, error) {
	var w jobWire
	if err := decodeStrict(SchemaJobV1, value, &w); err != nil {
		return nil, err
	}
	if err := checkSchemaField(SchemaJobV1, w.Schema, len(value)); err != nil {
		return nil, err
	}
	j := &Job{
		JobID:            w.JobID,
		Kind:             w.Kind,
		DocumentID:       w.DocumentID,
		DocumentType:     w.DocumentType,
		Branch:           oplog.DefaultBranch,
		QueueHint:        w.QueueHint,
		MaxRetries:       w.MaxRetries,
		Meta:             jsonvalue.NullAsAbsent(w.Meta),
		SubmittedAtUtcMs: w.SubmittedAtUtcMs,
		Fork:             w.Fork,
		Promote:          w.Promote,
	}
	if w.Branch != nil {
		j.Branch = *w.Branch
		if j.Branch == "" {
			return nil, invalid(SchemaJobV1, len(value), &ValidationError{Schema: SchemaJobV1, Field: "branch", Reason: "empty; leave it out for main", Type: ErrDecode})
		}
	}
	if w.Actions == nil {
		return nil, invalid(SchemaJobV1, len(value), &ValidationError{Schema: SchemaJobV1, Field: "actions", Reason: "missing (use [] for none)", Type: ErrDecode})
	}
	j.Actions = make([]oplog.Action, len(w.Actions))
	for i, a := range w.Actions {
		if a.TimestampUtcMs == nil {
			return nil, invalid(SchemaJobV1, len(value), &ValidationError{Schema: SchemaJobV1, Field: "actions[" + strconv.Itoa(i) + "].timestampUtcMs", Reason: "missing", Type: ErrInvalidAction})
		}
		j.Actions[i] = oplog.Action{
			ID: a.ID, Type: a.Type, Scope: a.Scope, TimestampUtcMs: *a.TimestampUtcMs,
			Input: jsonvalue.NullAsAbsent(a.Input), Context: jsonvalue.NullAsAbsent(a.Context),
			Signature: a.Signature,
		}
	}
	ops, err := parseLoadOperations(w.Operations)
	if err != nil {
		return nil, invalid(SchemaJobV1, len(value), err)
	}
	j.Operations = ops
	if err := j.validate(false); err != nil {
		return nil, invalid(SchemaJobV1, len(value), err)
	}
	return j, nil
}

// Decoder decodes records from doclog's topics.
type Decoder struct {
	// MaxBytes bounds a record's value; a larger one is a *DecodeError of
	// type RECORD_TOO_LARGE. Default 1 MiB (DefaultMaxSize), the broker's
	// default message size.
	MaxBytes int
}

func (d Decoder) maxBytes() int {
	if d.MaxBytes <= 0 {
		return DefaultMaxSize
	}
	return d.MaxBytes
}

// DecodeJob decodes a record from the jobs topic with the default Decoder.
func DecodeJob(rec *kgo.Record) (*Job, error) { return Decoder{}.Job(rec) }

// Job decodes a record from the jobs topic: size, schema header, JSON, and
// that the record key is the job's documentId (a record keyed otherwise
// would be ordered with another document's jobs).
func (d Decoder) Job(rec *kgo.Record) (*Job, error) {
	if len(rec.Value) > d.maxBytes() {
		return nil, tooLarge(SchemaJobV1, len(rec.Value), d.maxBytes())
	}
	if err := checkHeader(rec, SchemaJobV1); err != nil {
		return nil, err
	}
	j, err := parseJob(rec.Value)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(rec.Key, []byte(j.DocumentID)) {
		key := string(rec.Key)
		if rec.Key == nil {
			key = "null"
		} else if !utf8.ValidString(key) {
			key = fmt.Sprintf("%x", rec.Key)
		} else {
			key = strconv.Quote(key)
		}
		return nil, &DecodeError{Schema: SchemaJobV1, Size: len(rec.Value), Type: ErrDecode,
			Reason: fmt.Sprintf("record key %s is not the job's documentId %q: jobs are keyed by document so a document's jobs stay in order", key, j.DocumentID)}
	}
	return j, nil
}
