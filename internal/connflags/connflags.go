// Package connflags is the one definition of how doclog and doclogctl reach
// Postgres, Kafka and ClickHouse: the flags (and so the DOCLOG_* variables
// and config file keys, see internal/config), their defaults, which are
// secrets, and where each lands. Both binaries bind it, so a setting has one
// name, one default and one spelling in every form.
package connflags

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
)

// The flags, for messages that name them.
const (
	DatabaseURL            = "database-url"
	DatabaseConnectTimeout = "database-connect-timeout"
	KafkaSeeds             = "kafka-seeds"
	ClickHouseURL          = "clickhouse-url"
)

// DefaultKafkaSeeds is where Kafka is looked for when nothing says.
const DefaultKafkaSeeds = "localhost:9092"

// DefaultDatabaseConnectTimeout bounds one connection attempt to Postgres
// (TCP, TLS and authentication) when the URL sets no connect_timeout. pgx
// has no bound of its own, so without one a server that accepts and never
// answers holds a connection attempt for as long as the caller's context.
const DefaultDatabaseConnectTimeout = 10 * time.Second

// Targets are where Bind stores each setting. Every field is required.
type Targets struct {
	DatabaseURL *string
	// DatabaseConnectTimeout: 0 means DefaultDatabaseConnectTimeout.
	DatabaseConnectTimeout *time.Duration
	Kafka                  *kafka.Config
	// SASLMechanism is the mechanism as given; Resolve puts it, upper
	// case, into Kafka.
	SASLMechanism *string
	ClickHouseURL *string
}

// Connections holds the settings for a program that keeps them apart from
// its other settings, as doclogctl does.
type Connections struct {
	DatabaseURL            string
	DatabaseConnectTimeout time.Duration
	Kafka                  kafka.Config
	SASLMechanism          string
	ClickHouseURL          string
}

// Targets points at c's fields.
func (c *Connections) Targets() Targets {
	return Targets{DatabaseURL: &c.DatabaseURL, DatabaseConnectTimeout: &c.DatabaseConnectTimeout, Kafka: &c.Kafka, SASLMechanism: &c.SASLMechanism, ClickHouseURL: &c.ClickHouseURL}
}

// OpenLog opens the operation log at c's database (OpenLog).
func (c *Connections) OpenLog(ctx context.Context) (*postgres.Store, error) {
	return OpenLog(ctx, c.DatabaseURL, c.DatabaseConnectTimeout)
}

// Resolve completes the Kafka configuration from the flags: the SASL
// mechanism in upper case. Call it after the flags are parsed.
func (c *Connections) Resolve() { Resolve(c.Targets()) }

// Resolve completes t's Kafka configuration from the flags.
func Resolve(t Targets) {
	if *t.SASLMechanism != "" {
		t.Kafka.SASL.Mechanism = kafka.SASLMechanism(strings.ToUpper(*t.SASLMechanism))
	}
}

// SecretFlags are the flags of Bind whose values are credentials: each can
// also be read from the file DOCLOG_<FLAG>_FILE names. The SASL username is
// one since it sits beside the password in the same Secret.
var SecretFlags = []string{DatabaseURL, "kafka-sasl-username", "kafka-sasl-password", ClickHouseURL}

// BindConnectTimeout declares --database-connect-timeout on fs, storing
// into d: for a command that reaches Postgres only (doclog migrate).
func BindConnectTimeout(fs *pflag.FlagSet, d *time.Duration) {
	*d = DefaultDatabaseConnectTimeout
	fs.Var(positiveDuration{d}, DatabaseConnectTimeout, "bound on one connection attempt to Postgres, TLS and authentication included, when the URL has no connect_timeout (the URL's wins): raising it tolerates a slow network or server at the cost of noticing an unreachable one later")
}

// Bind declares the connection flags on fs, storing into t, and marks the
// secrets. clientID is the default Kafka client id, which names the program
// in the brokers' logs and quotas.
func Bind(fs *pflag.FlagSet, t Targets, clientID string) {
	fs.StringVar(t.DatabaseURL, DatabaseURL, "", "Postgres URL, e.g. postgres://doclog:PASSWORD@host:5432/doclog?sslmode=verify-full (also DATABASE_URL)")
	BindConnectTimeout(fs, t.DatabaseConnectTimeout)
	fs.StringSliceVar(&t.Kafka.Seeds, KafkaSeeds, []string{DefaultKafkaSeeds}, "Kafka bootstrap brokers")
	fs.StringVar(&t.Kafka.ClientID, "kafka-client-id", clientID, "Kafka client id")
	fs.DurationVar(&t.Kafka.DialTimeout, "kafka-dial-timeout", kafka.DefaultDialTimeout, "bound on one connection attempt to a broker, TLS and SASL included")
	fs.BoolVar(&t.Kafka.TLS.Enabled, "kafka-tls-enabled", false, "use TLS to the brokers")
	fs.StringVar(&t.Kafka.TLS.CAFile, "kafka-tls-ca-file", "", "CA bundle for the brokers' certificates")
	fs.StringVar(&t.Kafka.TLS.CertFile, "kafka-tls-cert-file", "", "client certificate")
	fs.StringVar(&t.Kafka.TLS.KeyFile, "kafka-tls-key-file", "", "client key")
	fs.StringVar(&t.Kafka.TLS.ServerName, "kafka-tls-server-name", "", "server name to verify")
	fs.StringVar(t.SASLMechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: none)")
	fs.StringVar(&t.Kafka.SASL.Username, "kafka-sasl-username", "", "SASL user")
	fs.StringVar(&t.Kafka.SASL.Password, "kafka-sasl-password", "", "SASL password")
	fs.StringVar(t.ClickHouseURL, ClickHouseURL, "", "ClickHouse of the analytics projector, e.g. clickhouse://host:9000/doclog?create_database=true (also CLICKHOUSE_URL)")
	config.MarkSecret(fs, SecretFlags...)
}

// Names are the flags Bind declares, for a config file's keys.
func Names() []string {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	var c Connections
	Bind(fs, c.Targets(), "")
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// ApplyEnv reads DOCLOG_* into the flags of fs not given (config.ApplyEnv),
// then the conventional DATABASE_URL and CLICKHOUSE_URL into the URLs still
// unset: a variable of either spelling wins over a config file.
func ApplyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if err := config.ApplyEnv(fs, lookup); err != nil {
		return err
	}
	for flag, env := range map[string]string{DatabaseURL: "DATABASE_URL", ClickHouseURL: "CLICKHOUSE_URL"} {
		f := fs.Lookup(flag)
		if f == nil || f.Changed {
			continue
		}
		if v, ok := lookup(env); ok && v != "" {
			_ = fs.Set(flag, v)
		}
	}
	return nil
}

// Defaults of Pool: pgxpool's own, named here so that the flags show them
// and a Pool built in code gets them.
const (
	DefaultDatabaseMinConns          = 0
	DefaultDatabaseMaxConnLifetime   = time.Hour
	DefaultDatabaseMaxConnIdleTime   = 30 * time.Minute
	DefaultDatabaseHealthCheckPeriod = time.Minute
)

// Pool paces the connections of a long-running process's pool (doclog
// serve's; doclogctl's commands are too short for it to matter). A zero
// field means its default; the pool size is the process's own setting.
type Pool struct {
	MinConns          int32
	MaxConnLifetime   time.Duration
	MaxConnIdleTime   time.Duration
	HealthCheckPeriod time.Duration
}

// WithDefaults returns a copy with every unset field at its default.
func (p Pool) WithDefaults() Pool {
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&p.MaxConnLifetime, DefaultDatabaseMaxConnLifetime}, {&p.MaxConnIdleTime, DefaultDatabaseMaxConnIdleTime}, {&p.HealthCheckPeriod, DefaultDatabaseHealthCheckPeriod}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	return p
}

// Apply sets p, with its defaults, on cfg, over any pool_* settings of the
// URL, as the pool size is.
func (p Pool) Apply(cfg *pgxpool.Config) {
	p = p.WithDefaults()
	cfg.MinConns, cfg.MaxConnLifetime, cfg.MaxConnIdleTime, cfg.HealthCheckPeriod = p.MinConns, p.MaxConnLifetime, p.MaxConnIdleTime, p.HealthCheckPeriod
}

// BindPool declares the flags of p on fs.
func BindPool(fs *pflag.FlagSet, p *Pool) {
	*p = Pool{MinConns: DefaultDatabaseMinConns}.WithDefaults()
	fs.Int32Var(&p.MinConns, "database-min-conns", DefaultDatabaseMinConns, "connections the pool keeps open even when idle (at most --database-max-conns): raising it spares a burst after a quiet spell the connection set-ups at the cost of connections held on the server")
	fs.Var(positiveDuration{&p.MaxConnLifetime}, "database-max-conn-lifetime", "age at which a connection is closed once released (and replaced when needed): raising it saves reconnecting at the cost of slower rebalancing across replicas or a pooler and of server-side memory that grows with a session's age")
	fs.Var(positiveDuration{&p.MaxConnIdleTime}, "database-max-conn-idle-time", "how long an unused connection above --database-min-conns stays open: raising it keeps connections for the next burst at the cost of connections held on the server while idle")
	fs.Var(positiveDuration{&p.HealthCheckPeriod}, "database-health-check-period", "how often the pool closes idle connections past their lifetime or idle time and tops itself up to --database-min-conns: raising it costs fewer sweeps at the cost of such connections lingering longer and of a slower refill")
}

// positiveDuration is a duration flag that refuses 0, which would read as
// the default, and negative values.
type positiveDuration struct{ p *time.Duration }

func (d positiveDuration) String() string {
	if d.p == nil {
		return ""
	}
	return d.p.String()
}
func (d positiveDuration) Type() string { return "duration" }

func (d positiveDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration, such as 10s")
	}
	if v <= 0 {
		return errors.New("must be positive")
	}
	*d.p = v
	return nil
}

// PoolConfig parses a Postgres URL (or keyword/value string) into a pool
// configuration whose connect timeout is connectTimeout (0:
// DefaultDatabaseConnectTimeout), unless the string sets connect_timeout
// itself, or PGCONNECT_TIMEOUT does: that one wins, 0 (no bound) included,
// as libpq has it.
func PoolConfig(databaseURL string, connectTimeout time.Duration) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	if !ownConnectTimeout(databaseURL) && cfg.ConnConfig.ConnectTimeout == 0 {
		if connectTimeout <= 0 {
			connectTimeout = DefaultDatabaseConnectTimeout
		}
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	return cfg, nil
}

var keywordConnectTimeout = regexp.MustCompile(`(^|\s)connect_timeout\s*=`)

// ownConnectTimeout reports whether the connection string names a
// connect_timeout, even 0, which ParseConfig cannot tell from none.
func ownConnectTimeout(s string) bool {
	if _, ok := os.LookupEnv("PGCONNECT_TIMEOUT"); ok {
		return true
	}
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		return err == nil && u.Query().Has("connect_timeout")
	}
	return keywordConnectTimeout.MatchString(s)
}

// OpenLog opens the operation log at databaseURL (postgres.OpenConfig) with
// the connect timeout PoolConfig applies. An attempt the timeout cut short
// says which setting bounded it, so that a server that accepts and never
// answers is told from one that refuses.
func OpenLog(ctx context.Context, databaseURL string, connectTimeout time.Duration) (*postgres.Store, error) {
	cfg, err := PoolConfig(databaseURL, connectTimeout)
	if err != nil {
		return nil, fmt.Errorf("connecting to Postgres: %w", err)
	}
	s, err := postgres.OpenConfig(ctx, cfg)
	if err != nil {
		return nil, ExplainConnectTimeout(ctx, err, databaseURL, cfg.ConnConfig.ConnectTimeout)
	}
	return s, nil
}

// ExplainConnectTimeout adds to err, an error of connecting to Postgres
// with a connect timeout of d, which setting set d when that bound (not
// ctx's) is what ended the attempt; any other error is returned as it is.
func ExplainConnectTimeout(ctx context.Context, err error, databaseURL string, d time.Duration) error {
	if d <= 0 || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	from := "--" + DatabaseConnectTimeout
	if ownConnectTimeout(databaseURL) {
		from = "connect_timeout of the database URL"
	}
	return fmt.Errorf("%w: Postgres did not answer within %s (%s)", err, d, from)
}
