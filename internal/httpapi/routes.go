package httpapi

import "net/http"

// Error codes of a request no route takes.
const (
	// CodeNotFound is the error code of a path no route serves (404).
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed is the error code of a method a path's routes do
	// not take (405, with an Allow header listing those they do).
	CodeMethodNotAllowed = "method_not_allowed"
)

// Routes serves mux, answering a request that none of its patterns match with
// the error body every other refusal has instead of net/http's plain text: 404
// not_found for a path no route serves, 405 method_not_allowed with the Allow
// header for a method the path's routes do not take. Redirects (a path that
// cleans to a route's) and every matched route are mux's own.
func Routes(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// The mux's fallback decides between 404 and 405 and computes
		// Allow; let it answer into a recorder and keep only that.
		rec := &statusRecorder{header: http.Header{}}
		mux.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			allow := rec.header.Get("Allow")
			w.Header().Set("Allow", allow)
			WriteError(w, &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed,
				Message: r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + allow})
		case http.StatusNotFound:
			WriteError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound,
				Message: "no route serves " + r.URL.Path})
		default:
			// Anything else the mux answers on its own is passed on as
			// it is.
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.status)
			_, _ = w.Write(rec.body)
		}
	})
}

// statusRecorder keeps what the mux's fallback handler writes.
type statusRecorder struct {
	header http.Header
	status int
	body   []byte
}

func (s *statusRecorder) Header() http.Header { return s.header }

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	s.body = append(s.body, b...)
	return len(b), nil
}
