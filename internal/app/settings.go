package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/doclog/doclog/internal/kafka"
	"github.com/doclog/doclog/internal/telemetry"
)

// The roles a process can run.
const (
	roleIngest     = "ingest"
	roleExecutor   = "executor"
	roleProjectors = "projectors"
	roleReadstore  = "readstore"
)

var allRoles = []string{roleIngest, roleExecutor, roleProjectors, roleReadstore}

// settings is everything `doclog serve` and `doclog dev` are configured with.
// Every field is a flag, and every flag can come from DOCLOG_<FLAG> (see
// internal/config); the defaults are in bindFlags.
type settings struct {
	roles []string

	logLevel, logEncoding string

	httpAddr, ingestAddr, readstoreAddr, opsAddr string
	authTokens                                   []string

	databaseURL      string
	databaseMaxConns int32
	migrate          string

	kafka      kafka.Config
	saslMech   string
	topics     kafka.TopicsConfig
	topicsMake bool

	projectors    []string
	clickhouseURL string

	jobResultsRetention time.Duration
}

func bindFlags(fs *pflag.FlagSet, s *settings) {
	fs.StringSliceVar(&s.roles, "roles", allRoles, "roles to run: ingest, executor, projectors, readstore")
	fs.StringVar(&s.logLevel, "log-level", telemetry.DefaultLogLevel, "least severe log level: debug, info, warn, error")
	fs.StringVar(&s.logEncoding, "log-encoding", telemetry.DefaultLogEncoding, "log format: json or console")
	fs.StringVar(&s.httpAddr, "http-addr", "", "API address of a process that serves one API role (overrides --ingest-addr or --readstore-addr)")
	fs.StringVar(&s.ingestAddr, "ingest-addr", ":8080", "address of the ingest API")
	fs.StringVar(&s.readstoreAddr, "readstore-addr", ":8081", "address of the readstore API")
	fs.StringVar(&s.opsAddr, "ops-addr", ":9090", "address of /healthz, /readyz and /metrics")
	fs.StringSliceVar(&s.authTokens, "auth-tokens", nil, "bearer tokens the APIs accept (none: authentication off)")
	fs.StringVar(&s.databaseURL, "database-url", "", "Postgres URL (also DATABASE_URL)")
	fs.Int32Var(&s.databaseMaxConns, "database-max-conns", 20, "Postgres pool size")
	fs.StringVar(&s.migrate, "migrate", "off", "apply schema migrations at start: auto or off")
	fs.StringSliceVar(&s.kafka.Seeds, "kafka-seeds", []string{"localhost:9092"}, "Kafka bootstrap brokers")
	fs.StringVar(&s.kafka.ClientID, "kafka-client-id", "doclog", "Kafka client id")
	fs.BoolVar(&s.kafka.TLS.Enabled, "kafka-tls-enabled", false, "use TLS to the brokers")
	fs.StringVar(&s.kafka.TLS.CAFile, "kafka-tls-ca-file", "", "CA bundle for the brokers' certificates")
	fs.StringVar(&s.kafka.TLS.CertFile, "kafka-tls-cert-file", "", "client certificate")
	fs.StringVar(&s.kafka.TLS.KeyFile, "kafka-tls-key-file", "", "client key")
	fs.StringVar(&s.kafka.TLS.ServerName, "kafka-tls-server-name", "", "server name to verify")
	fs.StringVar(&s.saslMech, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: none)")
	fs.StringVar(&s.kafka.SASL.Username, "kafka-sasl-username", "", "SASL user")
	fs.StringVar(&s.kafka.SASL.Password, "kafka-sasl-password", "", "SASL password")
	fs.BoolVar(&s.topicsMake, "topics-create", true, "create missing topics at start (and refuse a partition mismatch)")
	fs.StringVar(&s.topics.Prefix, "topics-prefix", "", "prefix of every topic and consumer group name")
	fs.Int32Var(&s.topics.JobsPartitions, "topics-jobs-partitions", kafka.DefaultJobsPartitions, "partitions of the jobs topic")
	fs.Int32Var(&s.topics.WriteReadyPartitions, "topics-write-ready-partitions", 0, "partitions of the write-ready topic (default: the jobs topic's)")
	fs.Int32Var(&s.topics.DeadLetterPartitions, "topics-dead-letter-partitions", kafka.DefaultDeadLetterPartitions, "partitions of the dead-letter topic")
	fs.Int16Var(&s.topics.ReplicationFactor, "topics-replication-factor", 0, "replication factor (default 3, or the broker count when smaller)")
	fs.IntVar(&s.topics.MinInsyncReplicas, "topics-min-insync-replicas", kafka.DefaultMinInsyncReplicas, "min.insync.replicas (capped at the replication factor)")
	fs.DurationVar(&s.topics.JobsRetention, "topics-jobs-retention", kafka.DefaultJobsRetention, "retention of the jobs topic: the longest executor outage survived")
	fs.DurationVar(&s.topics.WriteReadyRetention, "topics-write-ready-retention", kafka.DefaultWriteReadyRetention, "retention of the write-ready topic")
	fs.DurationVar(&s.topics.DeadLetterRetention, "topics-dead-letter-retention", kafka.DefaultDeadLetterRetention, "how long dead letters are kept")
	fs.StringSliceVar(&s.projectors, "projectors", []string{"docview", "indexer"}, "projectors to run (docview, indexer, analytics); analytics joins when --clickhouse-url is set")
	fs.StringVar(&s.clickhouseURL, "clickhouse-url", "", "ClickHouse for the analytics projector, e.g. clickhouse://host:9000/doclog?create_database=true (also CLICKHOUSE_URL)")
	fs.DurationVar(&s.jobResultsRetention, "retention-job-results", 30*24*time.Hour, "how long job results are kept (0: forever)")
}

// validate checks the settings and resolves the derived ones.
func (s *settings) validate() error {
	var errs []error
	for _, r := range s.roles {
		if !slices.Contains(allRoles, r) {
			errs = append(errs, fmt.Errorf("unknown role %q: the roles are %s", r, strings.Join(allRoles, ", ")))
		}
	}
	if len(s.roles) == 0 {
		errs = append(errs, errors.New("no roles: give --roles"))
	}
	if s.httpAddr != "" {
		api := 0
		for _, r := range s.roles {
			if r == roleIngest || r == roleReadstore {
				api++
			}
		}
		if api > 1 {
			errs = append(errs, errors.New("--http-addr names one API address, but both ingest and readstore run: use --ingest-addr and --readstore-addr"))
		}
		s.ingestAddr, s.readstoreAddr = s.httpAddr, s.httpAddr
	}
	if s.databaseURL == "" {
		errs = append(errs, errors.New("no database: set --database-url, DOCLOG_DATABASE_URL or DATABASE_URL"))
	}
	if s.databaseMaxConns < 2 {
		errs = append(errs, fmt.Errorf("--database-max-conns must be at least 2, got %d", s.databaseMaxConns))
	}
	if s.migrate != "auto" && s.migrate != "off" {
		errs = append(errs, fmt.Errorf("--migrate must be auto or off, not %q", s.migrate))
	}
	if s.saslMech != "" {
		s.kafka.SASL.Mechanism = kafka.SASLMechanism(strings.ToUpper(s.saslMech))
	}
	if err := s.kafka.WithDefaults().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := s.topics.WithDefaults().Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, p := range s.projectors {
		if p != "docview" && p != "indexer" && p != "analytics" {
			errs = append(errs, fmt.Errorf("unknown projector %q: the projectors are docview, indexer, analytics", p))
		}
	}
	if s.clickhouseURL != "" && !slices.Contains(s.projectors, "analytics") {
		s.projectors = append(s.projectors, "analytics")
	}
	if slices.Contains(s.projectors, "analytics") && s.clickhouseURL == "" {
		errs = append(errs, errors.New("the analytics projector needs --clickhouse-url"))
	}
	if s.jobResultsRetention < 0 {
		errs = append(errs, fmt.Errorf("--retention-job-results must not be negative, got %s", s.jobResultsRetention))
	}
	return errors.Join(errs...)
}

func (s *settings) runs(role string) bool { return slices.Contains(s.roles, role) }
