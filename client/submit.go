package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/google/uuid"
)

// Action is one action of a job (the ingest API's Action).
type Action struct {
	// ID is unique within the job; empty: the server derives
	// "<jobId>:<n>", so a retry under the same key carries the same ids.
	ID string `json:"id,omitempty"`
	// Type is an action the document model declares, or a document-scope
	// system action (SET_NAME, ADD_RELATIONSHIP, ...).
	Type string `json:"type"`
	// Scope is a scope the action allows: global, local or document.
	Scope string `json:"scope"`
	// TimestampUtcMs is the action's time in milliseconds since the epoch;
	// zero: the time the server received the request.
	TimestampUtcMs int64 `json:"timestampUtcMs,omitempty"`
	// Input is encoded as JSON and validated by the model's declaration of
	// the action; nil sends none.
	Input any `json:"input,omitempty"`
	// Context is carried with the operation and not interpreted.
	Context map[string]any `json:"context,omitempty"`
	// Signature is the producer's signature of the action; nil sends none.
	// A signed action sets ID and TimestampUtcMs, which the signature
	// covers.
	Signature *Signature `json:"signature,omitempty"`
}

// Signature is an action's signature: Ed25519 over the action's canonical
// form, made by its producer with the key KeyID names (docs/sync.md, Signed
// actions). The client carries it; the server checks it.
type Signature struct {
	KeyID     string `json:"keyId"`
	Algorithm string `json:"algorithm"`
	// Value is the signature in standard base64.
	Value string `json:"value"`
}

// CreateDocument is a create job (POST /v1/documents).
type CreateDocument struct {
	// DocumentID names the new document; empty: the server picks one
	// derived from the job id, so a retried create names the same document.
	DocumentID string `json:"documentId,omitempty"`
	// DocumentType is a type the server's model registry knows, as
	// "doclog/json". Required.
	DocumentType string `json:"documentType"`
	// Branch defaults to main.
	Branch string `json:"branch,omitempty"`
	// Name and Slug, when set, become SET_NAME and SET_SLUG actions right
	// after the document's creation.
	Name string `json:"name,omitempty"`
	Slug string `json:"slug,omitempty"`
	// Actions follow the creation in the same job.
	Actions []Action `json:"actions,omitempty"`
	// QueueHint lists jobs that must be WRITE_READY before this one runs.
	QueueHint []string `json:"queueHint,omitempty"`
	// MaxRetries bounds the executor's attempts after transient errors;
	// nil: the executor's default.
	MaxRetries *int `json:"maxRetries,omitempty"`
	// Meta is the producer's own data, carried and not interpreted.
	Meta map[string]any `json:"meta,omitempty"`
}

// Job is a mutate job: actions on an existing document (POST /v1/jobs).
type Job struct {
	// DocumentID and DocumentType name the document. Required.
	DocumentID   string `json:"documentId"`
	DocumentType string `json:"documentType"`
	// Branch defaults to main.
	Branch string `json:"branch,omitempty"`
	// Actions are applied in order, all or none. At least one.
	Actions    []Action       `json:"actions"`
	QueueHint  []string       `json:"queueHint,omitempty"`
	MaxRetries *int           `json:"maxRetries,omitempty"`
	Meta       map[string]any `json:"meta,omitempty"`
}

// DeleteDocument is a delete job (DELETE /v1/documents/{id}).
type DeleteDocument struct {
	// DocumentID and DocumentType name the document; the executor refuses
	// a delete whose type is not the document's. Required.
	DocumentID   string
	DocumentType string
	// Branch defaults to main.
	Branch string
}

// Accepted is the ingest API's 202: the broker holds the job, and its
// status is at GET /v1/jobs/{JobID}.
type Accepted struct {
	JobID      string `json:"jobId"`
	DocumentID string `json:"documentId"`
	// Status is PENDING.
	Status    string `json:"status"`
	StatusURL string `json:"statusUrl"`
	// IdempotencyKey is the key every attempt of the submit carried: the
	// caller's, or the one the client generated. Submitting again with it
	// is the same job.
	IdempotencyKey string `json:"-"`
}

// SubmitOption adjusts one submit.
type SubmitOption func(*submitOptions)

type submitOptions struct{ key string }

// WithIdempotencyKey sends key as the Idempotency-Key: the job id is
// derived from it, so every submit with the same key is one job. Keys are
// global to the deployment; use a UUID or prefix them with a name of your
// own. 1 to 256 bytes. Without this option the client generates a random
// key once per call and reuses it on every retry of that call.
func WithIdempotencyKey(key string) SubmitOption {
	return func(o *submitOptions) { o.key = key }
}

// CreateDocument submits a create job. It returns once the broker
// acknowledged the job; WaitJob follows it to its result.
func (c *Client) CreateDocument(ctx context.Context, d CreateDocument, opts ...SubmitOption) (*Accepted, error) {
	body, err := jsonBody(d)
	if err != nil {
		return nil, err
	}
	return c.submit(ctx, request{api: ingestWrite, method: http.MethodPost, path: "/v1/documents", body: body}, opts)
}

// SubmitJob submits actions on an existing document. It returns once the
// broker acknowledged the job; WaitJob follows it to its result.
func (c *Client) SubmitJob(ctx context.Context, j Job, opts ...SubmitOption) (*Accepted, error) {
	if j.Actions == nil {
		// An absent list is malformed; an empty one is the server's to
		// refuse with a message naming the field.
		j.Actions = []Action{}
	}
	body, err := jsonBody(j)
	if err != nil {
		return nil, err
	}
	return c.submit(ctx, request{api: ingestWrite, method: http.MethodPost, path: "/v1/jobs", body: body}, opts)
}

// DeleteDocument submits a delete job.
func (c *Client) DeleteDocument(ctx context.Context, d DeleteDocument, opts ...SubmitOption) (*Accepted, error) {
	q := url.Values{"documentType": {d.DocumentType}}
	if d.Branch != "" {
		q.Set("branch", d.Branch)
	}
	return c.submit(ctx, request{api: ingestWrite, method: http.MethodDelete, path: idPath("/v1/documents/", d.DocumentID, ""), query: q}, opts)
}

func (c *Client) submit(ctx context.Context, r request, opts []SubmitOption) (*Accepted, error) {
	var o submitOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.key == "" {
		o.key = uuid.NewString()
	}
	r.header = http.Header{"Idempotency-Key": {o.key}}
	var acc Accepted
	if err := c.do(ctx, r, &acc); err != nil {
		return nil, err
	}
	acc.IdempotencyKey = o.key
	return &acc, nil
}
