package readstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/httpapi"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/readstore/feed"
)

// OpenAPI is the API's OpenAPI 3 document, served at GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Deps are what the handler reads from.
type Deps struct {
	// Store queries the projections. Required.
	Store Store
	// Log reads operations and keyframes. Required.
	Log Log
	// Registry replays streams for state at a revision. Required.
	Registry *model.Registry
	// Logger logs refused and failed requests. Default: no logging.
	Logger *zap.Logger
	// Registerer receives the read store's metrics (doclog_readstore_*).
	// Default: a private registry.
	Registerer prometheus.Registerer
}

// Handler is the read store API as an http.Handler. Close it when done: it
// wakes waiting reads and stops the shared poller.
type Handler struct {
	cfg      Config
	store    Store
	log      Log
	registry *model.Registry
	logger   *zap.Logger
	waiter   *waiter
	m        *metrics
	bearer   httpapi.Bearer
	mux      *http.ServeMux
	served   http.Handler // mux, observed by request metrics
	// feedServed serves the change feed without the request metrics,
	// whose writer hides the connection's write deadline, and whose
	// durations a stream would only distort.
	feedServed http.Handler
	hub        *feed.Hub
	streams    atomic.Int64

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
	case deps.Store == nil:
		return nil, errors.New("read store handler needs a projection store")
	case deps.Log == nil:
		return nil, errors.New("read store handler needs the operation log")
	case deps.Registry == nil:
		return nil, errors.New("read store handler needs a model registry")
	}
	logger := deps.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	reg := deps.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	h := &Handler{
		cfg: cfg, store: deps.Store, log: deps.Log, registry: deps.Registry, logger: logger,
		m: newMetrics(reg), closing: make(chan struct{}),
	}
	h.waiter = newWaiter(h.progress, cfg.PollInterval, cfg.PollBatch, logger, h.m)
	if pn, ok := deps.Store.(ProgressNotifier); ok {
		h.waiter.notifier = pn
	}
	h.hub = feed.NewHub(deps.Log, cfg.FeedPollInterval)
	h.bearer = httpapi.NewBearer(cfg.ReadTokens, cfg.BearerTokens)
	if h.bearer.Off() {
		logger.Warn("read store authentication is off: no bearer tokens are configured, so anyone who reaches the API can read every document")
	}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/documents", h.auth(h.findDocuments))
	mux.Handle("GET /v1/documents/{idOrSlug}", h.auth(h.getDocument))
	mux.Handle("GET /v1/documents/{id}/operations", h.auth(h.operations))
	mux.Handle("GET /v1/documents/{id}/relationships", h.auth(h.relationships))
	mux.Handle("GET /v1/documents/{id}/state", h.auth(h.stateAt))
	mux.Handle("GET /v1/documents/{id}/branches", h.auth(h.branches))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(OpenAPI)
	})
	feedMux := http.NewServeMux()
	feedMux.Handle("GET "+ChangesPath, h.auth(h.changes))
	h.feedServed = httpapi.WithRequestID(httpapi.Routes(feedMux), logger)
	h.mux = mux
	h.served = httpapi.NewRequestMetrics(reg, "readstore").Wrap(httpapi.WithRequestID(httpapi.Routes(mux), logger))
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == ChangesPath {
		h.feedServed.ServeHTTP(w, r)
		return
	}
	h.served.ServeHTTP(w, r)
}

// Close answers every waiting read with 503, ends every change stream
// with event: end (reason shutdown), stops the pollers and makes /readyz
// fail. It is safe to call more than once.
func (h *Handler) Close() {
	h.closeOnce.Do(func() {
		close(h.closing)
		h.waiter.close()
		h.hub.Close()
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

// readyz reports ready when the handler is not shutting down and the
// projection database answers. It answers anyone, without a token, so it
// says ready or not and nothing more; why is in the log and on the ops
// port's /readyz.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.isClosing() {
		httpapi.WriteNotReady(w)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.store.Ping(ctx); err != nil {
		h.logger.Warn("readiness: the projection database does not answer", httpapi.RequestIDField(r), zap.Error(err))
		httpapi.WriteNotReady(w)
		return
	}
	httpapi.WriteReady(w)
}

// auth checks the bearer token (httpapi.Bearer): every route of the read
// store reads, so a read token will do.
func (h *Handler) auth(next func(http.ResponseWriter, *http.Request) *APIError) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if apiErr := h.bearer.Check(r, httpapi.ScopeRead); apiErr != nil {
			writeError(w, apiErr)
			return
		}
		if apiErr := next(w, r); apiErr != nil {
			writeError(w, apiErr) // which logs a failure's cause with the request id
		}
	})
}

// unavailable reports whether err is an outage of a dependency rather than a
// fault: the projection database or the log's does not answer, or a wait
// on one ran out of time.
func unavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || oplog.IsUnavailable(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// internal turns a dependency's failure while doing what into the API's
// error: 503 unavailable for an outage, 500 internal otherwise. The driver's
// text, which names servers, ports and the database user, goes to the log
// only (Cause); the client gets the request id to quote.
func internal(what string, err error) *APIError {
	cause := fmt.Errorf("%s: %w", what, err)
	if unavailable(err) {
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Cause: cause,
			Message: "the read store's database is unavailable; retry later"}
	}
	return &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Cause: cause,
		Message: "the read store failed to " + what + "; the server's log has the details under the request id"}
}

// query is a request's query string, checked against the parameters its
// route knows, with its branch.
type query struct {
	v      url.Values
	branch string
}

func parseQuery(r *http.Request, known ...string) (query, *APIError) {
	v := r.URL.Query()
	known = append(known, "branch", TokenParam, "wait")
	for name, vals := range v {
		if !slices.Contains(known, name) {
			slices.Sort(known)
			return query{}, paramError(name, "unknown query parameter (known: %s)", strings.Join(known, ", "))
		}
		if len(vals) > 1 {
			return query{}, paramError(name, "given %d times; give it once", len(vals))
		}
	}
	q := query{v: v, branch: oplog.DefaultBranch}
	if v.Has("branch") {
		var apiErr *APIError
		if q.branch, apiErr = checkName("branch", v.Get("branch")); apiErr != nil {
			return query{}, apiErr
		}
	}
	return q, nil
}

// parseStreamQuery is parseQuery for a route that reads one stream of the
// log: it also reads ?scope=, default global.
func parseStreamQuery(r *http.Request, known ...string) (query, string, *APIError) {
	q, apiErr := parseQuery(r, append(known, "scope")...)
	if apiErr != nil {
		return q, "", apiErr
	}
	scope := oplog.ScopeGlobal
	if q.v.Has("scope") {
		scope, apiErr = checkName("scope", q.get("scope"))
	}
	return q, scope, apiErr
}

func (q query) get(name string) string { return q.v.Get(name) }

// checkName validates an identifier parameter as the log stores them:
// non-empty and at most model.MaxIDLength characters (code points, as the
// record contract counts them).
func checkName(field, v string) (string, *APIError) {
	if v == "" {
		return "", paramError(field, "must not be empty")
	}
	if n := utf8.RuneCountInString(v); n > model.MaxIDLength {
		return "", paramError(field, "%d characters, more than the %d allowed", n, model.MaxIDLength)
	}
	return v, nil
}

// int64Param reads an integer parameter of at least lo; def when absent.
func (q query) int64Param(name string, lo, def int64) (int64, *APIError) {
	if !q.v.Has(name) {
		return def, nil
	}
	n, err := strconv.ParseInt(q.get(name), 10, 64)
	if err != nil {
		return 0, paramError(name, "%q is not an integer", q.get(name))
	}
	if n < lo {
		return 0, paramError(name, "must be at least %d, got %d", lo, n)
	}
	return n, nil
}

// limit reads ?limit= within the configured bounds.
func (h *Handler) limit(q query) (int, *APIError) {
	n, apiErr := q.int64Param("limit", 1, int64(h.cfg.DefaultPageLimit))
	if apiErr != nil {
		return 0, apiErr
	}
	if n > int64(h.cfg.MaxPageLimit) {
		return 0, paramError("limit", "must be at most %d, got %d", h.cfg.MaxPageLimit, n)
	}
	return int(n), nil
}

// consistency reads the request's consistency token and ?wait=, waits for
// source to reach the token, and reports why it did not.
func (h *Handler) consistency(r *http.Request, q query, source Source) *APIError {
	inHeader := r.Header.Values(TokenHeader)
	inQuery := q.get(TokenParam)
	var raw, field string
	switch {
	case len(inHeader) > 1:
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidToken, Field: TokenHeader,
			Message: TokenHeader + ": given more than once; merge the coordinates into one token"}
	case len(inHeader) == 1 && q.v.Has(TokenParam) && inHeader[0] != inQuery:
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidToken, Field: TokenParam,
			Message: TokenParam + ": differs from the " + TokenHeader + " header; send the token once"}
	case len(inHeader) == 1:
		raw, field = inHeader[0], TokenHeader
	case q.v.Has(TokenParam):
		raw, field = inQuery, TokenParam
	}
	wait := h.cfg.DefaultWait
	if q.v.Has("wait") {
		d, err := httpapi.ParseWait(q.get("wait"), h.cfg.MaxWait)
		if err != nil {
			return paramError("wait", "%s", err)
		}
		wait = d
	}
	if field == "" {
		return nil
	}
	token, err := oplog.DecodeToken(raw)
	if err != nil {
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidToken, Field: field, Message: field + ": " + err.Error() + "; " + tokenForm}
	}
	err = h.waiter.await(r.Context(), source, token, wait)
	var (
		timeout *ConsistencyTimeoutError
		quar    *QuarantinedError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &timeout) && timeout.LastErr != nil && unavailable(timeout.LastErr):
		// The source did not fall behind: it could not be asked.
		return internal("wait for the consistency token", err)
	case errors.As(err, &timeout):
		e := &APIError{Status: http.StatusGatewayTimeout, Code: CodeConsistencyTimeout, Field: field, Message: timeout.behind()}
		if timeout.LastErr != nil {
			e.Cause = err
		}
		return e
	case errors.As(err, &quar):
		return &APIError{Status: http.StatusConflict, Code: CodeStreamQuarantined, Field: field, Message: err.Error()}
	case errors.As(err, new(closingError)):
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: err.Error()}
	}
	return internal("wait for the consistency token", err)
}

// progress looks up how far source has applied streams: the projections
// through the store, the log through its revisions (one query per document
// and branch: a token rarely names more than one document).
func (h *Handler) progress(ctx context.Context, source Source, streams []oplog.StreamKey) (map[oplog.StreamKey]StreamProgress, error) {
	if source != SourceLog {
		return h.store.Progress(ctx, source, streams)
	}
	type docBranch struct{ doc, branch string }
	revs := map[docBranch]oplog.Revisions{}
	out := make(map[oplog.StreamKey]StreamProgress, len(streams))
	for _, k := range streams {
		key := docBranch{k.DocumentID, k.Branch}
		rv, ok := revs[key]
		if !ok {
			var err error
			if rv, err = h.log.Revisions(ctx, k.DocumentID, k.Branch); err != nil {
				return nil, fmt.Errorf("read the log's revisions of %s: %w", k.DocumentID, err)
			}
			revs[key] = rv
		}
		out[k] = StreamProgress{Applied: rv.Revision[k.Scope] - 1}
	}
	return out, nil
}
