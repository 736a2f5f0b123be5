package readstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultAddr              = ":8081"
	DefaultWait              = 5 * time.Second
	DefaultMaxWait           = 30 * time.Second
	DefaultPollInterval      = 25 * time.Millisecond
	DefaultPollBatch         = 1000
	DefaultPageLimit         = 100
	DefaultMaxPageLimit      = 1000
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultShutdownTimeout   = 30 * time.Second

	DefaultFeedMaxStreams      = 1000
	DefaultFeedHeartbeat       = 15 * time.Second
	DefaultFeedWriteTimeout    = 10 * time.Second
	DefaultFeedMaxAge          = time.Hour
	DefaultFeedPollInterval    = 50 * time.Millisecond
	DefaultFeedPageSize        = 500
	DefaultFeedMaxFilterValues = 100
)

// Config configures the read store API. The zero value is usable after
// WithDefaults, with authentication off.
type Config struct {
	// Addr is the address the Server listens on. Default ":8081".
	Addr string
	// BearerTokens are the write tokens a client may present in
	// "Authorization: Bearer <token>", and ReadTokens the read tokens.
	// Every route of the read store reads, so both are accepted everywhere;
	// the two lists exist so one set of tokens serves ingest and the read
	// store alike. Any token is accepted, so tokens can be rotated without
	// downtime. No token in either list turns authentication off (the
	// handler logs a warning). Default none.
	BearerTokens []string
	ReadTokens   []string
	// DefaultWait is how long a read carrying a consistency token waits for
	// its source to reach the token when the request names no ?wait=.
	// Default 5s.
	DefaultWait time.Duration
	// MaxWait caps ?wait=; a longer wait is shortened to it. Default 30s.
	MaxWait time.Duration
	// PollInterval is how often the shared poller looks up the streams
	// that waiting reads need. Default 25ms: a token is usually reached
	// within a few of the projector's batches.
	PollInterval time.Duration
	// PollBatch bounds the streams of one lookup; more waited-for streams
	// are looked up in several per tick. Default 1000.
	PollBatch int
	// DefaultPageLimit is the page size of a list without ?limit=. Default
	// 100.
	DefaultPageLimit int
	// MaxPageLimit is the largest ?limit= accepted. Default 1000.
	MaxPageLimit int
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration
	// ShutdownTimeout bounds a graceful Stop when the caller's context has
	// no deadline. Default 30s.
	ShutdownTimeout time.Duration
	// FeedMaxStreams bounds the change-feed streams (GET /v1/changes) one
	// process serves at once; one more is answered 503 with Retry-After.
	// Default 1000.
	FeedMaxStreams int
	// FeedHeartbeat is how long a stream goes without sending before it
	// sends a heartbeat carrying the position it has scanned to. Default
	// 15s.
	FeedHeartbeat time.Duration
	// FeedWriteTimeout bounds one write to a stream: a consumer that does
	// not take an event (or heartbeat) within it is disconnected, so a slow
	// reader holds no more than the connection's buffers and one page.
	// Default 10s.
	FeedWriteTimeout time.Duration
	// FeedMaxAge is the longest a stream stays open; it then ends with
	// "event: end" (reason max_age) and the client resumes from its last
	// id. Default 1h.
	FeedMaxAge time.Duration
	// FeedPollInterval is how often the feed's shared poller reads the end
	// of the log's tail while streams wait at the head: one query per
	// interval for all of them. Default 50ms.
	FeedPollInterval time.Duration
	// FeedPageSize is how many rows of the tail a stream reads at a time,
	// what it holds per connection (a transaction larger than a page is
	// held whole). Default 500.
	FeedPageSize int
	// FeedMaxFilterValues bounds the values of one filter parameter of a
	// stream (documentId=… given many times, say). Default 100.
	FeedMaxFilterValues int
	// TLS, if not nil, makes the Server serve HTTPS only, with this
	// configuration (internal/certfile builds one from files, reloading the
	// certificate). Default nil: plain HTTP.
	TLS *tls.Config
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.DefaultWait == 0 {
		c.DefaultWait = DefaultWait
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.PollBatch == 0 {
		c.PollBatch = DefaultPollBatch
	}
	if c.DefaultPageLimit == 0 {
		c.DefaultPageLimit = DefaultPageLimit
	}
	if c.MaxPageLimit == 0 {
		c.MaxPageLimit = DefaultMaxPageLimit
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.FeedMaxStreams == 0 {
		c.FeedMaxStreams = DefaultFeedMaxStreams
	}
	if c.FeedHeartbeat == 0 {
		c.FeedHeartbeat = DefaultFeedHeartbeat
	}
	if c.FeedWriteTimeout == 0 {
		c.FeedWriteTimeout = DefaultFeedWriteTimeout
	}
	if c.FeedMaxAge == 0 {
		c.FeedMaxAge = DefaultFeedMaxAge
	}
	if c.FeedPollInterval == 0 {
		c.FeedPollInterval = DefaultFeedPollInterval
	}
	if c.FeedPageSize == 0 {
		c.FeedPageSize = DefaultFeedPageSize
	}
	if c.FeedMaxFilterValues == 0 {
		c.FeedMaxFilterValues = DefaultFeedMaxFilterValues
	}
	return c
}

// Validate reports the first setting that cannot work, in a sentence naming
// it. Call it on the result of WithDefaults.
func (c Config) Validate() error {
	for i, t := range c.BearerTokens {
		if t == "" {
			return fmt.Errorf("read store bearer token %d is empty; an empty token would let anyone in", i)
		}
	}
	for i, t := range c.ReadTokens {
		if t == "" {
			return fmt.Errorf("read store read token %d is empty; an empty token would let anyone in", i)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"default wait", c.DefaultWait}, {"max wait", c.MaxWait}, {"poll interval", c.PollInterval},
		{"read header timeout", c.ReadHeaderTimeout}, {"shutdown timeout", c.ShutdownTimeout},
		{"feed heartbeat", c.FeedHeartbeat}, {"feed write timeout", c.FeedWriteTimeout},
		{"feed max age", c.FeedMaxAge}, {"feed poll interval", c.FeedPollInterval},
	} {
		if d.v <= 0 {
			return fmt.Errorf("read store %s must be positive, got %s", d.name, d.v)
		}
	}
	if c.DefaultWait > c.MaxWait {
		return fmt.Errorf("read store default wait %s exceeds the max wait %s", c.DefaultWait, c.MaxWait)
	}
	if c.PollBatch < 1 {
		return fmt.Errorf("read store poll batch must be at least 1, got %d", c.PollBatch)
	}
	if c.DefaultPageLimit < 1 || c.MaxPageLimit < c.DefaultPageLimit {
		return fmt.Errorf("read store page limits must be positive with the maximum (%d) at least the default (%d)", c.MaxPageLimit, c.DefaultPageLimit)
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"feed max streams", c.FeedMaxStreams}, {"feed page size", c.FeedPageSize}, {"feed max filter values", c.FeedMaxFilterValues},
	} {
		if n.v < 1 {
			return fmt.Errorf("read store %s must be at least 1, got %d", n.name, n.v)
		}
	}
	if c.FeedHeartbeat >= c.FeedMaxAge {
		return fmt.Errorf("read store feed heartbeat %s must be shorter than the feed max age %s", c.FeedHeartbeat, c.FeedMaxAge)
	}
	if c.Addr == "" {
		return errors.New("read store address must not be empty")
	}
	return nil
}
