package app

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

	"github.com/doclog/doclog/internal/certfile"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/connflags"
	"github.com/doclog/doclog/internal/depwait"
	"github.com/doclog/doclog/internal/gcpercent"
	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/internal/telemetry"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/projectors/catalog"
)

// The roles a process can run.
const (
	RoleIngest     = "ingest"
	RoleExecutor   = "executor"
	RoleProjectors = "projectors"
	RoleReadstore  = "readstore"
)

var AllRoles = []string{RoleIngest, RoleExecutor, RoleProjectors, RoleReadstore}

// Settings is everything `doclog serve` and `doclog dev` are configured with.
// Every field is a flag, and every flag can come from DOCLOG_<FLAG> (see
// internal/config); the defaults are in bindFlags.
type Settings struct {
	Roles []string

	LogLevel, LogEncoding string

	HTTPAddr, IngestAddr, ReadstoreAddr, OpsAddr string
	// AuthWriteTokens may call every route of both APIs, AuthReadTokens
	// only the routes that read (the read store, ingest's job status).
	// AuthTokens is the older name of the write tokens, kept working.
	AuthWriteTokens, AuthReadTokens, AuthTokens []string

	// TLS, with a certificate and key, makes the API ports serve HTTPS
	// only; OpsTLS makes the ops port do so too, with the same pair.
	TLS    certfile.ServerFiles
	OpsTLS bool

	DatabaseURL      string
	DatabaseMaxConns int32
	// DatabaseConnectTimeout bounds one connection attempt when the URL
	// sets no connect_timeout; 0 means connflags' default.
	DatabaseConnectTimeout time.Duration
	// DatabasePool paces the pool's connections; zero fields mean
	// connflags' defaults.
	DatabasePool connflags.Pool
	// Migrate is "auto" (apply migrations at start) or "off".
	Migrate string

	Kafka         kafka.Config
	SASLMechanism string
	Topics        kafka.TopicsConfig
	CreateTopics  bool

	Projectors    []string
	ClickHouseURL string
	startSettings // --analytics-start, a worker's --start (startpos.go)

	JobResultsRetention time.Duration

	// GCPercent is the garbage collector's target (GOGC) the commands set
	// for their process (package gcpercent), 0 for its default; app.New
	// leaves the runtime alone, since a program embedding the roles owns
	// its own.
	GCPercent int

	// Signatures are the key set and policies of signed actions.
	Signatures SignatureSettings

	// Tuning holds the components' knobs (tuning.go).
	Tuning Tuning

	// Wait is how Run waits for Postgres, Kafka and ClickHouse at start.
	// It has no flags; its zero value takes depwait's defaults (250ms
	// doubling to 5s between attempts, 5s per probe, a log entry per
	// dependency at most every 30s).
	Wait depwait.Config
}

// BindFlags declares every setting as a flag of fs, with doclog serve's
// defaults.
func BindFlags(fs *pflag.FlagSet, s *Settings) { BindFlagsWith(fs, s, FlagDefaults{}) }

// FlagDefaults are the defaults that differ between doclog serve and a
// projector's own worker binary (package worker), whose serve runs its
// projectors unless told otherwise.
type FlagDefaults struct {
	// Roles is the default of --roles. Default AllRoles.
	Roles []string
	// Projectors is the default of --projectors. Default
	// catalog.Defaults().
	Projectors []string
	// StartFlag names the flag of the start position of the projectors
	// that choose theirs (catalog.Spec.ChoosesStart). Default
	// "analytics-start", doclog's only such projector.
	StartFlag string
}

// WithDefaults returns d with every unset field at its default.
func (d FlagDefaults) WithDefaults() FlagDefaults {
	if d.Roles == nil {
		d.Roles = AllRoles
	}
	if d.Projectors == nil {
		d.Projectors = catalog.Defaults()
	}
	if d.StartFlag == "" {
		d.StartFlag = DefaultStartFlag
	}
	return d
}

// BindFlagsWith is BindFlags with other defaults.
func BindFlagsWith(fs *pflag.FlagSet, s *Settings, d FlagDefaults) {
	d = d.WithDefaults()
	fs.StringSliceVar(&s.Roles, "roles", d.Roles, "roles to run: ingest, executor, projectors, readstore")
	fs.StringVar(&s.LogLevel, "log-level", telemetry.DefaultLogLevel, "least severe log level: debug, info, warn, error")
	fs.StringVar(&s.LogEncoding, "log-encoding", telemetry.DefaultLogEncoding, "log format: json or console")
	fs.StringVar(&s.HTTPAddr, "http-addr", "", "API address of a process that serves one API role (overrides --ingest-addr or --readstore-addr)")
	fs.StringVar(&s.IngestAddr, "ingest-addr", ":8080", "address of the ingest API")
	fs.StringVar(&s.ReadstoreAddr, "readstore-addr", ":8081", "address of the readstore API")
	fs.StringVar(&s.OpsAddr, "ops-addr", ":9090", "address of /healthz, /readyz and /metrics")
	fs.StringSliceVar(&s.AuthWriteTokens, "auth-write-tokens", nil, "bearer tokens that may call every route of both APIs, submits included; at least 32 characters each (no token at all: authentication off)")
	fs.StringSliceVar(&s.AuthReadTokens, "auth-read-tokens", nil, "bearer tokens that may only read: the readstore and ingest's job status; at least 32 characters each")
	fs.StringSliceVar(&s.AuthTokens, "auth-tokens", nil, "deprecated name of --auth-write-tokens (full access); both lists are accepted")
	fs.StringVar(&s.TLS.CertFile, "tls-cert-file", "", "certificate (PEM, intermediates after it) of the API ports: with --tls-key-file they serve HTTPS only, TLS 1.2 at least; both files are re-read when they change")
	fs.StringVar(&s.TLS.KeyFile, "tls-key-file", "", "key of --tls-cert-file (PEM)")
	fs.StringVar(&s.TLS.ClientCAFile, "tls-client-ca-file", "", "CA bundle (PEM) whose client certificates the API ports require: mutual TLS (empty: no client certificate asked for); read at start")
	fs.BoolVar(&s.OpsTLS, "ops-tls-enabled", false, "serve /healthz, /readyz and /metrics over HTTPS too, with --tls-cert-file and --tls-key-file and no client certificate asked for")
	connflags.Bind(fs, s.connections(), kafka.DefaultClientID)
	fs.Int32Var(&s.DatabaseMaxConns, "database-max-conns", 20, "Postgres pool size")
	connflags.BindPool(fs, &s.DatabasePool)
	fs.StringVar(&s.Migrate, "migrate", "off", "apply schema migrations at start: auto or off")
	fs.StringVar(&s.Kafka.Membership.MemberName, "member-name", "", "this process's name in its consumer groups (static membership: a restart under the same name takes its partitions back at once); unique per process and stable across restarts, such as the pod name (empty: dynamic membership)")
	fs.DurationVar(&s.Kafka.Membership.SessionTimeout, "kafka-session-timeout", kafka.DefaultSessionTimeout, "how long a member that stopped heartbeating (killed, cut off) keeps its partitions")
	fs.DurationVar(&s.Kafka.Membership.HeartbeatInterval, "kafka-heartbeat-interval", kafka.DefaultHeartbeatInterval, "how often a member heartbeats its groups; at most a third of the session timeout")
	fs.BoolVar(&s.CreateTopics, "topics-create", true, "create missing topics at start (and refuse a partition mismatch)")
	fs.StringVar(&s.Topics.Prefix, "topics-prefix", "", "prefix of every topic and consumer group name")
	fs.Int32Var(&s.Topics.JobsPartitions, "topics-jobs-partitions", kafka.DefaultJobsPartitions, "partitions of the jobs topic")
	fs.Int32Var(&s.Topics.WriteReadyPartitions, "topics-write-ready-partitions", 0, "partitions of the write-ready topic (default: the jobs topic's)")
	fs.Int32Var(&s.Topics.DeadLetterPartitions, "topics-dead-letter-partitions", kafka.DefaultDeadLetterPartitions, "partitions of the dead-letter topic")
	fs.Int16Var(&s.Topics.ReplicationFactor, "topics-replication-factor", 0, "replication factor (default 3, or the broker count when smaller)")
	fs.IntVar(&s.Topics.MinInsyncReplicas, "topics-min-insync-replicas", kafka.DefaultMinInsyncReplicas, "min.insync.replicas (capped at the replication factor)")
	fs.DurationVar(&s.Topics.JobsRetention, "topics-jobs-retention", kafka.DefaultJobsRetention, "retention of the jobs topic: the longest executor outage survived")
	fs.DurationVar(&s.Topics.WriteReadyRetention, "topics-write-ready-retention", kafka.DefaultWriteReadyRetention, "retention of the write-ready topic")
	fs.DurationVar(&s.Topics.DeadLetterRetention, "topics-dead-letter-retention", kafka.DefaultDeadLetterRetention, "how long dead letters are kept")
	fs.StringSliceVar(&s.Projectors, "projectors", d.Projectors, "projectors to run ("+strings.Join(catalog.Names(), ", ")+"); those whose tables live in ClickHouse join when --clickhouse-url is set")
	bindStartFlags(fs, s, d.StartFlag)
	fs.IntVar(&s.GCPercent, "gc-percent", gcpercent.Default, "garbage collector target, as GOGC: a collection starts once the heap grew this many percent past what the last one left; when not given, GOGC in the environment wins over the default")
	fs.DurationVar(&s.JobResultsRetention, "retention-job-results", 30*24*time.Hour, "how long job results are kept (0: forever)")
	bindSignatureFlags(fs, &s.Signatures)
	bindTuningFlags(fs, s)
	config.MarkSecret(fs, "auth-write-tokens", "auth-read-tokens", "auth-tokens")
}

// SecretFlags are the flags whose values are credentials: each can also be
// read from the file DOCLOG_<FLAG>_FILE names (internal/config): the
// connection settings' (connflags) and the bearer tokens.
var SecretFlags = slices.Concat(connflags.SecretFlags, []string{"auth-write-tokens", "auth-read-tokens", "auth-tokens"})

// connections are the fields connflags binds: the same settings, under the
// same names, as doclogctl's.
func (s *Settings) connections() connflags.Targets {
	return connflags.Targets{DatabaseURL: &s.DatabaseURL, DatabaseConnectTimeout: &s.DatabaseConnectTimeout, Kafka: &s.Kafka, SASLMechanism: &s.SASLMechanism, ClickHouseURL: &s.ClickHouseURL}
}

// Validate checks the settings and resolves the derived ones.
func (s *Settings) Validate() error {
	var errs []error
	for _, r := range s.Roles {
		if !slices.Contains(AllRoles, r) {
			errs = append(errs, fmt.Errorf("unknown role %q: the roles are %s", r, strings.Join(AllRoles, ", ")))
		}
	}
	if len(s.Roles) == 0 {
		errs = append(errs, errors.New("no roles: give --roles"))
	}
	if s.HTTPAddr != "" {
		api := 0
		for _, r := range s.Roles {
			if r == RoleIngest || r == RoleReadstore {
				api++
			}
		}
		if api > 1 {
			errs = append(errs, errors.New("--http-addr names one API address, but both ingest and readstore run: use --ingest-addr and --readstore-addr"))
		}
		s.IngestAddr, s.ReadstoreAddr = s.HTTPAddr, s.HTTPAddr
	}
	if s.DatabaseURL == "" {
		errs = append(errs, errors.New("no database: set --database-url, DOCLOG_DATABASE_URL, DOCLOG_DATABASE_URL_FILE or DATABASE_URL"))
	}
	if s.DatabaseMaxConns < 2 {
		errs = append(errs, fmt.Errorf("--database-max-conns must be at least 2, got %d", s.DatabaseMaxConns))
	}
	if n := s.DatabasePool.MinConns; n < 0 || n > s.DatabaseMaxConns {
		errs = append(errs, fmt.Errorf("--database-min-conns must be between 0 and --database-max-conns (%d), got %d", s.DatabaseMaxConns, n))
	}
	if (s.TLS.CertFile == "") != (s.TLS.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together: give both, or neither"))
	}
	if s.TLS.CertFile == "" && (s.TLS.ClientCAFile != "" || s.OpsTLS) {
		errs = append(errs, errors.New("--tls-client-ca-file and --ops-tls-enabled need --tls-cert-file and --tls-key-file"))
	}
	if s.Migrate != "auto" && s.Migrate != "off" {
		errs = append(errs, fmt.Errorf("--migrate must be auto or off, not %q", s.Migrate))
	}
	connflags.Resolve(s.connections())
	if err := s.Kafka.WithDefaults().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := s.Topics.WithDefaults().Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, p := range s.Projectors {
		spec, err := catalog.Lookup(p)
		if err != nil {
			errs = append(errs, err)
		} else if spec.ClickHouse && s.ClickHouseURL == "" {
			errs = append(errs, fmt.Errorf("the %s projector needs --clickhouse-url", p))
		}
	}
	if s.ClickHouseURL != "" {
		for _, spec := range catalog.All() {
			if spec.ClickHouse && !slices.Contains(s.Projectors, spec.Name) {
				s.Projectors = append(s.Projectors, spec.Name)
			}
		}
	}
	if err := s.Wait.WithDefaults().Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.validateTokens()...)
	errs = append(errs, s.validateTuning()...)
	errs = append(errs, s.Signatures.validate()...)
	if err := gcpercent.Validate(s.GCPercent); err != nil {
		errs = append(errs, err)
	}
	if s.JobResultsRetention < 0 {
		errs = append(errs, fmt.Errorf("--retention-job-results must not be negative, got %s", s.JobResultsRetention))
	}
	return errors.Join(errs...)
}

func (s *Settings) runs(role string) bool { return slices.Contains(s.Roles, role) }

// AuthOff reports that no bearer token of any list is configured: both APIs
// then answer anyone.
func (s *Settings) AuthOff() bool {
	return len(s.AuthWriteTokens)+len(s.AuthTokens)+len(s.AuthReadTokens) == 0
}

// writeTokens are the tokens with full access: --auth-write-tokens and the
// older --auth-tokens.
func (s *Settings) writeTokens() []string {
	return slices.Concat(s.AuthWriteTokens, s.AuthTokens)
}

// validateTokens refuses empty and short tokens (httpapi.MinTokenLength)
// and a token given as both read and write, naming the flag and the index,
// never the token: the error is printed and logged.
func (s *Settings) validateTokens() []error {
	var errs []error
	lists := []struct {
		flag   string
		tokens []string
	}{{"--auth-write-tokens", s.AuthWriteTokens}, {"--auth-tokens", s.AuthTokens}, {"--auth-read-tokens", s.AuthReadTokens}}
	for _, l := range lists {
		if err := httpapi.CheckTokens(l.flag, l.tokens); err != nil {
			errs = append(errs, err)
		}
	}
	writes := map[string]string{} // a write token -> where it was given
	for _, l := range lists[:2] {
		for j, t := range l.tokens {
			writes[strings.TrimSpace(t)] = fmt.Sprintf("index %d of %s", j, l.flag)
		}
	}
	for i, t := range s.AuthReadTokens {
		if where, ok := writes[strings.TrimSpace(t)]; ok && strings.TrimSpace(t) != "" {
			errs = append(errs, fmt.Errorf("--auth-read-tokens: the token at index %d (0-based) is also the write token at %s; a token either reads or writes", i, where))
		}
	}
	return errs
}

// PoolConfig is the configuration of the process's Postgres pool: the URL
// with the connect timeout, the pool size and the pool's pacing applied.
func (s *Settings) PoolConfig() (*pgxpool.Config, error) {
	cfg, err := connflags.PoolConfig(s.DatabaseURL, s.DatabaseConnectTimeout)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	cfg.MaxConns = s.DatabaseMaxConns
	s.DatabasePool.Apply(cfg)
	return cfg, nil
}
