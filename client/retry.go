package client

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/doclog/doclog/internal/backoff"
)

// retryableStatus reports whether an answer is worth sending the request
// again: throttling, and the gateway and unavailability answers a server or
// proxy gives while a dependency recovers. Every other 4xx and 5xx is the
// server's verdict on this request.
func retryableStatus(e *APIError) bool {
	switch e.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable:
		return true
	case http.StatusGatewayTimeout:
		// The read store's own 504 is the end of a wait the caller chose;
		// a proxy's 504 has no such code.
		return e.Code != CodeConsistencyTimeout
	}
	return false
}

// RetryAfter parses the wait an answer advises: Retry-After-Ms (whole
// milliseconds, which doclog's ingest sends beside Retry-After because its
// waits are often shorter than a second) when present and valid, else
// Retry-After (seconds, or an HTTP date). Zero when absent, malformed or in
// the past; at most a day, so that a broken header cannot park a call
// whose context has no deadline for good.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	const most = 24 * time.Hour
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
			return min(time.Duration(min(ms, int64(most/time.Millisecond)))*time.Millisecond, most)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, int64(most/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), most)
	}
	return 0
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// delayFor is the wait before the next attempt after err: the server's
// Retry-After when it sent one, the backoff otherwise.
func (c *Client) delayFor(err error, retry int) time.Duration {
	if e := AsAPIError(err); e != nil && e.RetryAfter > 0 {
		return e.RetryAfter
	}
	return backoff.Exponential(c.cfg.BaseDelay, c.cfg.MaxDelay, retry)
}

// retryable reports whether a failed attempt may be sent again: any
// failure to get an answer (the request is idempotent, a submit by its
// key), and the answers retryableStatus names. The caller's context ending
// is not retried.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if e := AsAPIError(err); e != nil {
		return retryableStatus(e)
	}
	var perm *permanentError
	return !errors.As(err, &perm)
}

// permanentError is a failure no retry can cure: a request that cannot be
// built, an answer that does not decode.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }
