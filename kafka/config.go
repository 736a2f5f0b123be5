// Package kafka owns doclog's Kafka plumbing: turning configuration (seeds,
// TLS, SASL, logging) into franz-go client options, and the specs of doclog's
// topics, which it creates idempotently and checks against the cluster so a
// member never runs against a topic whose partitioning differs from the one
// it was configured for.
//
// It does not wrap *kgo.Client: callers get the client itself and declare the
// few methods they use where they use them.
package kafka

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"

	"github.com/doclog/doclog/internal/backoff"
	"github.com/doclog/doclog/internal/certfile"
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultClientID    = "doclog"
	DefaultDialTimeout = 10 * time.Second
	DefaultLogLevel    = LogWarn
)

// SASLMechanism names a SASL mechanism doclog can authenticate with.
type SASLMechanism string

const (
	SASLNone        SASLMechanism = ""
	SASLPlain       SASLMechanism = "PLAIN"
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
)

// LogLevel is the level franz-go's own logging is let through at.
type LogLevel string

const (
	LogNone  LogLevel = "none"
	LogError LogLevel = "error"
	LogWarn  LogLevel = "warn"
	LogInfo  LogLevel = "info"
	LogDebug LogLevel = "debug"
)

func (l LogLevel) kgo() (kgo.LogLevel, bool) {
	switch l {
	case LogNone:
		return kgo.LogLevelNone, true
	case LogError:
		return kgo.LogLevelError, true
	case LogWarn:
		return kgo.LogLevelWarn, true
	case LogInfo:
		return kgo.LogLevelInfo, true
	case LogDebug:
		return kgo.LogLevelDebug, true
	}
	return 0, false
}

// Config is how a doclog process reaches its Kafka cluster. Every role shares
// it; role-specific options (consumer group, producer acks) are added by the
// role on top of Options.
type Config struct {
	// Seeds are the bootstrap brokers as host:port. Required.
	Seeds []string
	// ClientID names this process to the brokers, for quotas and broker
	// logs. Default "doclog".
	ClientID string
	// DialTimeout bounds one connection attempt. Default 10s.
	DialTimeout time.Duration
	// TLS encrypts connections to the brokers. Default off.
	TLS TLSConfig
	// SASL authenticates to the brokers. Default none.
	SASL SASLConfig
	// LogLevel is what franz-go logs through the zap logger given to
	// Options: none, error, warn, info or debug. Default warn, because info
	// logs every connection and metadata refresh.
	LogLevel LogLevel
	// Membership is how the process takes part in the consumer groups of
	// its roles (see membership.go).
	Membership Membership
}

// TLSConfig configures TLS to the brokers.
type TLSConfig struct {
	// Enabled turns TLS on. Default false.
	Enabled bool
	// CAFile is a PEM bundle of the authorities that sign the brokers'
	// certificates. Default: the system's roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and key for mutual
	// TLS; both or neither. Default: no client certificate.
	CertFile string
	KeyFile  string
	// ServerName overrides the name verified in the brokers' certificates.
	// Default: the host of each broker's address.
	ServerName string
	// InsecureSkipVerify disables certificate verification, for local
	// clusters with self-signed certificates only. Default false.
	InsecureSkipVerify bool
}

// SASLConfig configures SASL authentication.
type SASLConfig struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. Default none.
	// PLAIN sends the password as is, so use it only with TLS.
	Mechanism SASLMechanism
	// Username and Password are required with a mechanism.
	Username string
	Password string
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	c.SASL.Mechanism = SASLMechanism(strings.ToUpper(string(c.SASL.Mechanism)))
	c.Membership = c.Membership.WithDefaults()
	return c
}

// Validate reports the first setting that cannot work, in a sentence naming
// the setting. Call it on the result of WithDefaults.
func (c Config) Validate() error {
	if len(c.Seeds) == 0 {
		return errors.New("kafka seeds are required: name at least one broker as host:port")
	}
	for _, s := range c.Seeds {
		if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
			return fmt.Errorf("kafka seed %q is not host:port", s)
		}
	}
	if c.ClientID == "" {
		return errors.New("kafka client id must not be empty")
	}
	if c.DialTimeout <= 0 {
		return fmt.Errorf("kafka dial timeout must be positive, got %s", c.DialTimeout)
	}
	if _, ok := c.LogLevel.kgo(); !ok {
		return fmt.Errorf("kafka log level %q is not one of none, error, warn, info, debug", c.LogLevel)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("kafka tls needs both a certificate file and a key file, or neither")
	}
	if !c.TLS.Enabled && (c.TLS.CAFile != "" || c.TLS.CertFile != "" || c.TLS.ServerName != "" || c.TLS.InsecureSkipVerify) {
		return errors.New("kafka tls options are set but tls is not enabled")
	}
	switch c.SASL.Mechanism {
	case SASLNone:
		if c.SASL.Username != "" || c.SASL.Password != "" {
			return errors.New("kafka sasl credentials are set but no sasl mechanism is")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASL.Username == "" || c.SASL.Password == "" {
			return fmt.Errorf("kafka sasl %s needs a username and a password", c.SASL.Mechanism)
		}
	default:
		return fmt.Errorf("kafka sasl mechanism %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", c.SASL.Mechanism)
	}
	return c.Membership.Validate()
}

// Options applies defaults, validates, reads the TLS files and returns the
// client options for this configuration. Logging goes through logger when it
// is not nil.
func (c Config) Options(logger *zap.Logger) ([]kgo.Opt, error) {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Seeds...),
		kgo.ClientID(c.ClientID),
		kgo.DialTimeout(c.DialTimeout),
		kgo.RetryBackoffFn(retryBackoff),
	}
	if c.TLS.Enabled {
		tc, err := c.TLS.build()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch c.SASL.Mechanism {
	case SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: c.SASL.Username, Pass: c.SASL.Password}.AsMechanism()))
	case SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASL.Username, Pass: c.SASL.Password}.AsSha256Mechanism()))
	case SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASL.Username, Pass: c.SASL.Password}.AsSha512Mechanism()))
	}
	if logger != nil {
		level, _ := c.LogLevel.kgo()
		opts = append(opts, kgo.WithLogger(kzap.New(logger.Named("kafka"), kzap.Level(level))))
	}
	return opts, nil
}

// maxRetryBackoff caps the wait between a client's retries (requests, the
// group's join loop). franz-go's default grows to 5s: after a broker came
// back from a 45s outage in a chaos run, the members' group loops and
// ingest's producer sat out about 6s of backoff before any work moved, and
// the pipeline drained in 16.6s instead of the usual 1-7s. A retry a second
// per client is nothing to a broker that answers, and little to one that
// does not.
const maxRetryBackoff = time.Second

// retryBackoff is a jittered exponential backoff from 100ms to
// maxRetryBackoff, by the number of consecutive failures (from 1).
func retryBackoff(fails int) time.Duration {
	return backoff.Exponential(100*time.Millisecond, maxRetryBackoff, fails)
}

// NewClient builds a client from the configuration plus a role's own options.
func NewClient(c Config, logger *zap.Logger, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.Options(logger)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("create kafka client: %w", err)
	}
	return cl, nil
}

func (t TLSConfig) build() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented as local-only
	}
	if t.CAFile != "" {
		pool, err := certfile.CAPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read kafka tls ca file: %w", err)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load kafka tls client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
