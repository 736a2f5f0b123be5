package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultMaxAttempts = 5
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 5 * time.Second
	DefaultUserAgent   = "doclog-go-client/1"
	// DefaultJobPollWait is the ?wait= of each long poll of WaitJob: below
	// the ingest API's default cap of 30s, so the server answers before a
	// proxy with a 30s idle timeout would cut the request.
	DefaultJobPollWait = 25 * time.Second
	// DefaultFeedIdleTimeout is how long the change feed may stay silent
	// before the client drops the connection and resumes: four of the
	// server's default heartbeat intervals (15s), so a connection that died
	// without closing is noticed.
	DefaultFeedIdleTimeout = time.Minute
)

// Config configures a Client. Only the URLs of the APIs the caller uses are
// required: IngestURL to submit and wait, ReadstoreURL to read and follow
// the feed.
type Config struct {
	// IngestURL is the base URL of the ingest API (scheme and host, and a
	// path prefix if a proxy adds one), as "http://127.0.0.1:8080".
	// Required for submits and job status.
	IngestURL string
	// ReadstoreURL is the base URL of the read store. Required for reads
	// and the change feed.
	ReadstoreURL string
	// Token is the bearer token sent to both APIs when WriteToken or
	// ReadToken is empty. Default none: no Authorization header.
	Token string
	// WriteToken is sent with submits. Default Token.
	WriteToken string
	// ReadToken is sent with job status requests, reads and the change
	// feed. Default Token, or WriteToken when Token is empty (a write token
	// may call every route).
	ReadToken string
	// HTTPClient sends the requests. Its Timeout, if any, must exceed
	// JobPollWait and would cut the change feed; bound calls with their
	// context instead. Default a client of its own over
	// http.DefaultTransport, without a timeout.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one call, the first included: a
	// request that failed on the network or was answered 429, 502, 503 or
	// 504 is sent again until then. For the change feed it bounds the
	// attempts to open its first stream; once one opened, the feed resumes
	// until its context ends. Default 5; 1 turns retries off.
	MaxAttempts int
	// BaseDelay is the delay before the first retry; it doubles with each
	// further retry, up to MaxDelay, and each delay is drawn at random from
	// its upper half (jitter). A Retry-After header of the answer replaces
	// it. Default 100ms.
	BaseDelay time.Duration
	// MaxDelay caps the delay between attempts (not a Retry-After the
	// server sent). Default 5s.
	MaxDelay time.Duration
	// UserAgent is the User-Agent header of every request. Default
	// "doclog-go-client/1".
	UserAgent string
	// JobPollWait is the ?wait= of each long poll WaitJob sends; the
	// server caps it (30s by default). Default 25s.
	JobPollWait time.Duration
	// FeedIdleTimeout is how long the change feed may send nothing, not
	// even a heartbeat, before the client drops the connection and resumes.
	// Default 1 minute; negative: wait forever.
	FeedIdleTimeout time.Duration
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.WriteToken == "" {
		c.WriteToken = c.Token
	}
	if c.ReadToken == "" {
		c.ReadToken = c.Token
	}
	if c.ReadToken == "" {
		c.ReadToken = c.WriteToken
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BaseDelay == 0 {
		c.BaseDelay = DefaultBaseDelay
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.JobPollWait == 0 {
		c.JobPollWait = DefaultJobPollWait
	}
	if c.FeedIdleTimeout == 0 {
		c.FeedIdleTimeout = DefaultFeedIdleTimeout
	}
	return c
}

// Validate reports the first setting that cannot work, in a sentence naming
// the field.
func (c Config) Validate() error {
	if c.IngestURL == "" && c.ReadstoreURL == "" {
		return errors.New("client config: IngestURL or ReadstoreURL is required")
	}
	for _, u := range []struct{ field, v string }{{"IngestURL", c.IngestURL}, {"ReadstoreURL", c.ReadstoreURL}} {
		if u.v == "" {
			continue
		}
		if err := checkBaseURL(u.v); err != nil {
			return fmt.Errorf("client config: %s: %w", u.field, err)
		}
	}
	switch {
	case c.MaxAttempts < 1:
		return fmt.Errorf("client config: MaxAttempts must be at least 1, got %d", c.MaxAttempts)
	case c.BaseDelay < 0:
		return fmt.Errorf("client config: BaseDelay must not be negative, got %s", c.BaseDelay)
	case c.MaxDelay < c.BaseDelay:
		return fmt.Errorf("client config: MaxDelay (%s) must be at least BaseDelay (%s)", c.MaxDelay, c.BaseDelay)
	case c.JobPollWait < 0:
		return fmt.Errorf("client config: JobPollWait must not be negative, got %s", c.JobPollWait)
	case c.HTTPClient == nil:
		return errors.New("client config: HTTPClient is nil; WithDefaults sets one")
	}
	return nil
}

func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: the scheme must be http or https", s)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: a base URL takes no query or fragment", s)
	}
	return nil
}
