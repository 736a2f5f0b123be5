package ingest

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/internal/telemetry"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/record"
)

// OpenAPI is the API's OpenAPI 3 document, served at GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Producer sends a record and calls promise once the broker acknowledged it
// (err nil) or it failed. *kgo.Client satisfies it; build it with
// ProducerOptions so that an acknowledgement means every in-sync replica has
// the record.
//
// The handler waits for the promise only until Config.ProduceTimeout: the
// idempotent producer does not give up on a record it may already have sent
// (doing so could reorder or duplicate it), so with the broker gone the
// promise may come much later, when the broker is back or the client closes.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

// Pinger is implemented by a Producer that can tell whether a broker
// answers (*kgo.Client does); /readyz uses it when present.
type Pinger interface {
	Ping(ctx context.Context) error
}

// ResultReader reads stored job results; *postgres.Store satisfies it. It
// returns the results of the jobs that have one, keyed by job id, and no
// entry for the others.
type ResultReader interface {
	JobResults(ctx context.Context, jobIDs []string) (map[string]oplog.JobResult, error)
}

// ReadReadiness tells whether the document view serves a consistency token
// yet: a WRITE_READY job whose token it has reached is reported READ_READY.
// readstore.ReadReadiness implements it over the document view's progress,
// and `doclog serve` wires it in; without one the handler reports
// WRITE_READY, which is true. An implementation must be monotone — once it
// has answered true for a token it must keep doing so — or a job's status
// would regress.
type ReadReadiness interface {
	ReadReady(ctx context.Context, token oplog.ConsistencyToken) (bool, error)
}

// ProducerOptions are the producer settings ingest relies on, to add to a
// role's kafka.Config options: acknowledgement from all in-sync replicas.
// franz-go's producer is idempotent by default, so a retried batch is never
// written twice. A topic the broker does not know yet (in KRaft a new topic
// reaches the broker's metadata a moment after its creation) is retried
// rather than failed after four metadata loads: ProduceTimeout bounds the
// wait either way.
func ProducerOptions() []kgo.Opt {
	return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.UnknownTopicRetries(-1)}
}

// Deps are what the handler talks to.
type Deps struct {
	// Producer sends jobs to the jobs topic. Required.
	Producer Producer
	// Results reads job results for GET /v1/jobs/{id}. Required.
	Results ResultReader
	// Registry is the model registry submissions are validated against.
	// Required.
	Registry *model.Registry
	// Signatures, when set, checks the signatures of a job's actions
	// before it is produced, so a producer learns of a bad one at once
	// (400 signature_invalid); the executors check again, since records
	// reach the topic without ingest too. Default nil: signatures are
	// passed on unchecked.
	Signatures SignatureVerifier
	// ReadReady reports READ_READY (readstore.ReadReadiness). Default nil:
	// a WRITE_READY job is reported WRITE_READY.
	ReadReady ReadReadiness
	// Backlog, when set, is the executor group's backlog on the jobs topic
	// (a *kafka.BacklogWatcher): past Config.MaxExecutorLag or
	// MaxExecutorLagRecords a submit is answered 429 executor_lag with a
	// Retry-After, so producers slow to the rate the executors sustain.
	// Default nil: no backpressure.
	Backlog Backlog
	// Logger logs with job and document ids. Default: no logging.
	Logger *zap.Logger
	// Registerer receives the API's metrics (doclog_ingest_*). Default: a
	// private registry.
	Registerer prometheus.Registerer
}

// Handler is the ingest API as an http.Handler. Close it when done: it wakes
// long-polling clients and stops the shared poller.
type Handler struct {
	cfg       Config
	producer  Producer
	results   ResultReader
	readReady ReadReadiness
	backlog   Backlog
	slots     retrySlots
	logger    *zap.Logger
	verifier  SignatureVerifier
	validator *validator
	poller    *poller
	bearer    httpapi.Bearer
	mux       *http.ServeMux
	served    http.Handler // mux, observed by request metrics
	produced  prometheus.Histogram
	refusals  *prometheus.CounterVec

	closeOnce sync.Once
	closing   chan struct{}
}

// NewHandler validates the configuration and builds the handler.
func NewHandler(cfg Config, deps Deps) (*Handler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case deps.Producer == nil:
		return nil, errors.New("ingest handler needs a producer")
	case deps.Results == nil:
		return nil, errors.New("ingest handler needs a result reader")
	case deps.Registry == nil:
		return nil, errors.New("ingest handler needs a model registry")
	}
	logger := deps.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	h := &Handler{
		cfg:       cfg,
		producer:  deps.Producer,
		results:   deps.Results,
		readReady: deps.ReadReady,
		backlog:   deps.Backlog,
		verifier:  deps.Signatures,
		logger:    logger,
		validator: newValidator(deps.Registry, cfg),
		poller:    newPoller(deps.Results, cfg.PollInterval, cfg.PollBatch, logger),
		closing:   make(chan struct{}),
	}
	h.bearer = httpapi.NewBearer(cfg.ReadTokens, cfg.BearerTokens)
	switch {
	case h.bearer.Off():
		logger.Warn("ingest authentication is off: no bearer tokens are configured, so anyone who reaches the API can submit jobs")
	case !h.bearer.Writable():
		logger.Warn("ingest has read tokens only: every submit will be answered 403 until a write token is configured")
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/jobs", h.auth(httpapi.ScopeWrite, h.submitJob))
	mux.Handle("POST /v1/jobs:batch", h.auth(httpapi.ScopeWrite, h.submitBatch))
	mux.Handle("POST /v1/documents", h.auth(httpapi.ScopeWrite, h.createDocument))
	mux.Handle("DELETE /v1/documents/{id}", h.auth(httpapi.ScopeWrite, h.deleteDocument))
	mux.Handle("POST /v1/documents/{id}/load", h.auth(httpapi.ScopeWrite, h.loadDocument))
	mux.Handle("GET /v1/jobs/{id}", h.auth(httpapi.ScopeRead, h.jobStatus))
	mux.Handle("POST /v1/documents/{id}/branches", h.auth(httpapi.ScopeWrite, h.forkBranch))
	mux.Handle("POST /v1/documents/{id}/branches/{branch}/promote", h.auth(httpapi.ScopeWrite, h.promoteBranch))
	mux.Handle("DELETE /v1/documents/{id}/branches/{branch}", h.auth(httpapi.ScopeWrite, h.deleteBranch))
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(OpenAPI)
	})
	h.mux = mux
	reg := deps.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	h.refusals = telemetry.Reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: telemetry.Namespace, Subsystem: "ingest", Name: "backpressure_refusals_total",
		Help: "Submits answered 429 executor_lag, by the backlog bound they passed (seconds or records).",
	}, []string{"bound"}))
	if h.backlog != nil {
		// Both series exist from the start, so a rate over them does too.
		h.refusals.WithLabelValues(boundSeconds)
		h.refusals.WithLabelValues(boundRecords)
	}
	h.served = httpapi.NewRequestMetrics(reg, "ingest").Wrap(httpapi.WithRequestID(httpapi.Routes(mux), logger))
	h.produced = telemetry.Reuse(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: telemetry.Namespace, Subsystem: "ingest", Name: "produce_seconds",
		Help:    "Seconds from producing a job's record to the broker's acknowledgement (acks=all).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 3, 12),
	}))
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.served.ServeHTTP(w, r) }

// Close wakes every long-polling client (each is answered with the status
// it has now), stops the poller and makes /readyz fail. It is safe to call
// more than once.
func (h *Handler) Close() {
	h.closeOnce.Do(func() {
		close(h.closing)
		h.poller.close()
	})
}

func (h *Handler) isClosing() bool {
	select {
	case <-h.closing:
		return true
	default:
		return false
	}
}

// auth refuses a request without a valid bearer token of scope
// (httpapi.Bearer).
func (h *Handler) auth(scope httpapi.Scope, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := h.bearer.Check(r, scope); e != nil {
			writeError(w, e)
			return
		}
		next(w, r)
	})
}

// submitted is the body of a 202.
type submitted struct {
	JobID      string          `json:"jobId"`
	DocumentID string          `json:"documentId"`
	Status     oplog.JobStatus `json:"status"`
	StatusURL  string          `json:"statusUrl"`
}

// jobID returns the job id of a submission: derived from the
// Idempotency-Key header when there is one, a UUIDv7 otherwise. keyed
// reports which.
func jobID(r *http.Request) (id string, keyed bool, apiErr *APIError) {
	keys, present := r.Header["Idempotency-Key"]
	if !present {
		id, apiErr := newJobID()
		return id, false, apiErr
	}
	if len(keys) != 1 || keys[0] == "" || len(keys[0]) > maxIdempotencyKey {
		return "", false, &APIError{Status: http.StatusBadRequest, Code: CodeInvalidField, Field: "Idempotency-Key",
			Message: fmt.Sprintf("Idempotency-Key: must be one header of 1 to %d bytes", maxIdempotencyKey)}
	}
	return model.JobIDFromIdempotencyKey(keys[0]), true, nil
}

// newJobID is the id of a job submitted without an idempotency key.
func newJobID() (string, *APIError) {
	v7, err := uuid.NewV7()
	if err != nil {
		return "", &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "a job id could not be generated", Cause: err}
	}
	return v7.String(), nil
}

// decodeRequest reads a submit's JSON body into v and assigns its job id;
// ok is false when the request was refused. The members named defaulted
// take a default when left out and may not be given empty.
func (h *Handler) decodeRequest(w http.ResponseWriter, r *http.Request, v any, defaulted ...string) (id string, keyed, ok bool) {
	body, apiErr := readBody(r, h.cfg.MaxBodyBytes)
	if apiErr == nil {
		apiErr = decodeStrict(body, v, "")
	}
	if apiErr == nil && (mayHoldNull(body) || len(defaulted) > 0) {
		m := membersOf(body)
		if apiErr = m.refuseNulls("", "meta"); apiErr == nil {
			apiErr = m.refuseEmpty("", defaulted...)
		}
	}
	if apiErr == nil {
		id, keyed, apiErr = jobID(r)
	}
	if apiErr != nil {
		h.refuse(w, r, apiErr)
		return "", false, false
	}
	return id, keyed, true
}

func (h *Handler) submitJob(w http.ResponseWriter, r *http.Request) {
	var b jobBody
	id, _, ok := h.decodeRequest(w, r, &b)
	if !ok {
		return
	}
	h.submit(w, r, id, &submission{
		kind: record.KindMutate, nowMs: time.Now().UnixMilli(), documentID: b.DocumentID, documentType: b.DocumentType, branch: b.Branch,
		actions: b.Actions, queueHint: b.QueueHint, maxRetries: b.MaxRetries, meta: b.Meta,
	})
}

func (h *Handler) createDocument(w http.ResponseWriter, r *http.Request) {
	var b createBody
	id, keyed, ok := h.decodeRequest(w, r, &b, "documentId")
	if !ok {
		return
	}
	if b.DocumentID == "" {
		if keyed {
			b.DocumentID = DocumentIDFromJob(id)
		} else {
			v7, err := uuid.NewV7()
			if err != nil {
				h.refuse(w, r, &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "a document id could not be generated", Cause: err})
				return
			}
			b.DocumentID = v7.String()
		}
	}
	nowMs := time.Now().UnixMilli()
	// The executor writes CREATE_DOCUMENT for a create job; a name and a
	// slug travel as the document-scope actions that set them, right after
	// it, so the record needs no fields beyond the job contract's.
	var pre []oplog.Action
	if b.Name != nil {
		raw, apiErr := h.validator.systemInput(model.ActionSetName, "name", model.SetNameInput{Name: *b.Name})
		if apiErr != nil {
			h.refuse(w, r, apiErr)
			return
		}
		pre = append(pre, oplog.Action{Type: model.ActionSetName, Scope: oplog.ScopeDocument, TimestampUtcMs: nowMs, Input: raw})
	}
	if b.Slug != nil {
		raw, apiErr := h.validator.systemInput(model.ActionSetSlug, "slug", model.SetSlugInput{Slug: *b.Slug})
		if apiErr != nil {
			h.refuse(w, r, apiErr)
			return
		}
		pre = append(pre, oplog.Action{Type: model.ActionSetSlug, Scope: oplog.ScopeDocument, TimestampUtcMs: nowMs, Input: raw})
	}
	h.submit(w, r, id, &submission{
		kind: record.KindCreate, nowMs: nowMs, documentID: b.DocumentID, documentType: b.DocumentType, branch: b.Branch, pre: pre,
		actions: b.Actions, queueHint: b.QueueHint, maxRetries: b.MaxRetries, meta: b.Meta,
	})
}

// deleteDocument submits a delete job. The job record names the document's
// type, which a DELETE has no body to carry, so it is a required query
// parameter (?documentType=); ingest keeps no state to look it up, and the
// executor refuses a delete whose type is not the document's.
func (h *Handler) deleteDocument(w http.ResponseWriter, r *http.Request) {
	q, id, ok := h.deleteRequest(w, r, "documentType", "branch")
	if !ok {
		return
	}
	s := &submission{kind: record.KindDelete, nowMs: time.Now().UnixMilli(), documentID: r.PathValue("id"), documentType: q.Get("documentType")}
	if q.Has("branch") {
		branch := q.Get("branch")
		s.branch = &branch
	}
	h.submit(w, r, id, s)
}

// submit validates, produces and answers.
func (h *Handler) submit(w http.ResponseWriter, r *http.Request, jobID string, s *submission) {
	job, rec, apiErr := h.prepare(s, jobID)
	if apiErr != nil {
		h.refuse(w, r, apiErr)
		return
	}
	if h.refusedForBacklog(w, r, 1) {
		return
	}
	// A client that hangs up does not cancel the produce: the record may
	// already be on its way, and the outcome is still worth logging.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.ProduceTimeout)
	defer cancel()
	start := time.Now()
	err := h.produce(ctx, rec)
	h.settleReservation(job, err == nil)
	if err != nil {
		h.logJob(zap.ErrorLevel, "produce job", job, httpapi.RequestIDField(r), zap.Error(err), zap.Duration("elapsed", time.Since(start)))
		writeError(w, produceError(err, job, rec))
		return
	}
	h.logJob(zap.DebugLevel, "job accepted", job, zap.Int("actions", len(job.Actions)), zap.Duration("elapsed", time.Since(start)))
	acc := accepted(job)
	w.Header().Set("Location", acc.StatusURL)
	writeJSON(w, http.StatusAccepted, acc)
}

// prepare validates a submission and encodes its job's record.
func (h *Handler) prepare(s *submission, jobID string) (*record.Job, *kgo.Record, *APIError) {
	job, apiErr := h.validator.build(s, jobID)
	if apiErr == nil {
		apiErr = h.checkSignatures(job, s)
	}
	if apiErr != nil {
		return nil, nil, apiErr
	}
	rec, err := record.NewJobRecord(h.cfg.JobsTopic, job)
	if err != nil {
		return nil, nil, recordError(err)
	}
	return job, rec, nil
}

// logJob logs an entry about a job with its ids, kind and type. The entry
// is checked against the level first, so an accepted job costs nothing at
// the default level: a logger.With per request would encode the four
// fields on every submit.
func (h *Handler) logJob(level zapcore.Level, msg string, job *record.Job, fields ...zap.Field) {
	if ce := h.logger.Check(level, msg); ce != nil {
		ce.Write(append([]zap.Field{zap.String("job_id", job.JobID), zap.String("document_id", job.DocumentID),
			zap.String("kind", string(job.Kind)), zap.String("document_type", job.DocumentType)}, fields...)...)
	}
}

// accepted is the answer for a job the broker acknowledged.
func accepted(job *record.Job) submitted {
	return submitted{JobID: job.JobID, DocumentID: job.DocumentID, Status: oplog.JobPending, StatusURL: "/v1/jobs/" + job.JobID}
}

// produceError is the answer for a job whose record the broker did not
// acknowledge.
func produceError(err error, job *record.Job, rec *kgo.Record) *APIError {
	if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeRecordTooLarge,
			Message: fmt.Sprintf("the broker refused the job's record of %d bytes as too large", len(rec.Value))}
	}
	// The client learns that the broker is the trouble, not the client's
	// error, whose text names the brokers' addresses: that is in the log
	// entry of the failure, under the request id.
	return &APIError{Status: http.StatusServiceUnavailable, Code: CodeBrokerUnavailable,
		Message: fmt.Sprintf("the broker did not acknowledge job %s; it may or may not have been accepted, so retry with the same Idempotency-Key", job.JobID)}
}

// produce sends the record and waits for its acknowledgement until ctx
// ends. The promise's channel is buffered so a late promise never blocks the
// producer.
func (h *Handler) produce(ctx context.Context, rec *kgo.Record) error {
	acked := make(chan error, 1)
	start := time.Now()
	h.producer.Produce(ctx, rec, func(_ *kgo.Record, err error) { acked <- err })
	select {
	case err := <-acked:
		h.produced.Observe(time.Since(start).Seconds())
		return err
	case <-ctx.Done():
		return fmt.Errorf("wait for the broker's acknowledgement: %w", context.Cause(ctx))
	}
}

// refuse answers a request the API does not accept; nothing was produced.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, e *APIError) {
	h.logger.Debug("request refused", zap.String("method", r.Method), zap.String("path", r.URL.Path),
		zap.Int("status", e.Status), zap.String("code", e.Code), zap.String("message", e.Message))
	writeError(w, e)
}

func (h *Handler) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports ready when the handler is not shutting down and a broker
// answers: without one no submit can succeed, so a load balancer should send
// clients elsewhere. It answers anyone, without a token, so it says ready or
// not and nothing more; why is in the log and on the ops port's /readyz.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.isClosing() {
		httpapi.WriteNotReady(w)
		return
	}
	if p, ok := h.producer.(Pinger); ok {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			h.logger.Warn("readiness: no broker answers", httpapi.RequestIDField(r), zap.Error(err))
			httpapi.WriteNotReady(w)
			return
		}
	}
	httpapi.WriteReady(w)
}
