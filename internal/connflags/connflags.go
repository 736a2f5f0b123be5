// Package connflags is the one definition of how doclog and doclogctl reach
// Postgres, Kafka and ClickHouse: the flags (and so the DOCLOG_* variables
// and config file keys, see internal/config), their defaults, which are
// secrets, and where each lands. Both binaries bind it, so a setting has one
// name, one default and one spelling in every form.
package connflags

import (
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/kafka"
)

// The flags, for messages that name them.
const (
	DatabaseURL   = "database-url"
	KafkaSeeds    = "kafka-seeds"
	ClickHouseURL = "clickhouse-url"
)

// DefaultKafkaSeeds is where Kafka is looked for when nothing says.
const DefaultKafkaSeeds = "localhost:9092"

// Targets are where Bind stores each setting. Every field is required.
type Targets struct {
	DatabaseURL *string
	Kafka       *kafka.Config
	// SASLMechanism is the mechanism as given; Resolve puts it, upper
	// case, into Kafka.
	SASLMechanism *string
	ClickHouseURL *string
}

// Connections holds the settings for a program that keeps them apart from
// its other settings, as doclogctl does.
type Connections struct {
	DatabaseURL   string
	Kafka         kafka.Config
	SASLMechanism string
	ClickHouseURL string
}

// Targets points at c's fields.
func (c *Connections) Targets() Targets {
	return Targets{DatabaseURL: &c.DatabaseURL, Kafka: &c.Kafka, SASLMechanism: &c.SASLMechanism, ClickHouseURL: &c.ClickHouseURL}
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

// Bind declares the connection flags on fs, storing into t, and marks the
// secrets. clientID is the default Kafka client id, which names the program
// in the brokers' logs and quotas.
func Bind(fs *pflag.FlagSet, t Targets, clientID string) {
	fs.StringVar(t.DatabaseURL, DatabaseURL, "", "Postgres URL, e.g. postgres://doclog:PASSWORD@host:5432/doclog?sslmode=verify-full (also DATABASE_URL; a connect timeout goes in the URL as connect_timeout=SECONDS)")
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
