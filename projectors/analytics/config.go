package analytics

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doclog/doclog/internal/certfile"
)

// Defaults of Config.
const (
	DefaultName          = "analytics"
	DefaultDatabase      = "doclog"
	DefaultUsername      = "default"
	DefaultDialTimeout   = 10 * time.Second
	DefaultInsertTimeout = 30 * time.Second
	DefaultBatchRows     = 10_000
	DefaultBatchDelay    = time.Second
	DefaultBatchMinBytes = 1 << 20
)

// Config configures the analytics projector: where ClickHouse is and how
// large its inserts grow.
type Config struct {
	// Name is the projector's name: it keys the runner's checkpoints and
	// stream heads and names the consumer group ("doclog-" + Name). A
	// second analytics projection (another ClickHouse, a rebuild) needs a
	// name of its own. Default "analytics".
	Name string

	// Addr lists ClickHouse servers' native-protocol addresses
	// (host:port, usually port 9000, or 9440 with TLS). Required. The HTTP
	// interface is not used: the native protocol is what works the same on
	// 18.16 and on current servers.
	Addr []string
	// Database holds the tables. Default "doclog". It must exist unless
	// CreateDatabase is set.
	Database string
	// CreateDatabase creates Database when it is missing. Default false:
	// in production the database is usually provisioned with its grants,
	// and the projector's user need not be allowed to create databases.
	CreateDatabase bool
	// Username and Password authenticate. Defaults "default" and "".
	Username string
	Password string
	// TLS, when set, encrypts the connection with it. Default nil
	// (plaintext).
	TLS *tls.Config

	// DialTimeout bounds connecting. Default 10s.
	DialTimeout time.Duration
	// InsertTimeout bounds one insert, from preparing it to ClickHouse's
	// acknowledgement. Default 30s.
	InsertTimeout time.Duration

	// BatchRows and BatchDelay bound the runner's polls when the runner is
	// configured with RunnerConfig: a poll holds up to BatchRows write-ready
	// records (each at least one operation row), and a fetch waits up to
	// BatchDelay for BatchMinBytes of records before it returns what there
	// is. Each partition's share of a poll is one runner batch and becomes
	// one insert per table, so inserts grow to thousands of rows under load
	// and happen about once per BatchDelay per partition when traffic is
	// light. Defaults 10000, 1s and 1 MiB.
	BatchRows     int
	BatchDelay    time.Duration
	BatchMinBytes int32

	// Registerer receives the projector's insert metrics. Default: a
	// private registry (the metrics are then not exported).
	Registerer prometheus.Registerer
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if c.Username == "" {
		c.Username = DefaultUsername
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.InsertTimeout == 0 {
		c.InsertTimeout = DefaultInsertTimeout
	}
	if c.BatchRows == 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.BatchDelay == 0 {
		c.BatchDelay = DefaultBatchDelay
	}
	if c.BatchMinBytes == 0 {
		c.BatchMinBytes = DefaultBatchMinBytes
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

// Validate reports the first setting that cannot work, as a *ConfigError.
// Call it on the result of WithDefaults.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Name == "":
		return bad("name", "must not be empty")
	case len(c.Addr) == 0:
		return bad("addr", "must list at least one ClickHouse server (host:port)")
	case !identifier.MatchString(c.Database):
		// The name is spliced into DDL and INSERT statements, so only plain
		// identifiers are accepted rather than quoting rules that differ
		// between server versions.
		return bad("database", "%q must be letters, digits and underscores, not starting with a digit", c.Database)
	case c.DialTimeout <= 0:
		return bad("dial timeout", "must be positive, got %s", c.DialTimeout)
	case c.InsertTimeout <= 0:
		return bad("insert timeout", "must be positive, got %s", c.InsertTimeout)
	case c.BatchRows < 1:
		return bad("batch rows", "must be at least 1, got %d", c.BatchRows)
	case c.BatchDelay < 10*time.Millisecond || c.BatchDelay > time.Minute:
		return bad("batch delay", "must be between 10ms and 1m, got %s", c.BatchDelay)
	case c.BatchMinBytes < 1:
		return bad("batch min bytes", "must be at least 1, got %d", c.BatchMinBytes)
	}
	for _, a := range c.Addr {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return bad("addr", "%q is not host:port", a)
		}
	}
	return nil
}

// ParseURL reads a ClickHouse URL such as CLICKHOUSE_URL into a Config
// (other fields at their zero value, so WithDefaults fills them):
//
//	clickhouse://user:password@host:9000,host2:9000/database?secure=true&skip_verify=false&create_database=true
//
// The scheme is clickhouse or tcp; the port defaults to 9000, or 9440 with
// secure=true. With secure=true, TLS verifies the server against the
// system's roots, or against the PEM bundle named by tls_ca_file;
// tls_cert_file and tls_key_file (both or neither) name a PEM client
// certificate and key for a server that asks for one; tls_server_name
// overrides the name verified, which is otherwise each address's host. The
// files are read here, so a missing or unreadable one fails at start.
func ParseURL(raw string) (Config, error) {
	var c Config
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the URL whole, password and all: keep
		// only its reason.
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err
		}
		return c, &ConfigError{Field: "url", Reason: fmt.Sprintf("cannot be parsed: %v", err)}
	}
	if u.Scheme != "clickhouse" && u.Scheme != "tcp" {
		return c, &ConfigError{Field: "url", Reason: fmt.Sprintf("scheme %q is not clickhouse or tcp (only the native protocol is supported)", u.Scheme)}
	}
	q := u.Query()
	flag := func(name string) (bool, error) {
		v := q.Get(name)
		if v == "" {
			return false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, &ConfigError{Field: "url", Reason: fmt.Sprintf("parameter %s=%q is not a boolean", name, v)}
		}
		return b, nil
	}
	secure, err := flag("secure")
	if err != nil {
		return c, err
	}
	skipVerify, err := flag("skip_verify")
	if err != nil {
		return c, err
	}
	if c.CreateDatabase, err = flag("create_database"); err != nil {
		return c, err
	}
	port := "9000"
	if secure {
		port = "9440"
		if c.TLS, err = tlsConfig(q, skipVerify); err != nil {
			return c, err
		}
	} else {
		for _, name := range tlsParams {
			if q.Get(name) != "" {
				return c, &ConfigError{Field: "url", Reason: fmt.Sprintf("parameter %s needs secure=true", name)}
			}
		}
	}
	for _, h := range splitHosts(u.Host) {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, port)
		}
		c.Addr = append(c.Addr, h)
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	if len(u.Path) > 1 {
		c.Database = u.Path[1:]
	}
	return c, nil
}

var tlsParams = []string{"tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name"}

func tlsConfig(q url.Values, skipVerify bool) (*tls.Config, error) {
	bad := func(format string, args ...any) error {
		return &ConfigError{Field: "url", Reason: fmt.Sprintf(format, args...)}
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         q.Get("tls_server_name"),
		InsecureSkipVerify: skipVerify, //nolint:gosec // the operator asked for it
	}
	if ca := q.Get("tls_ca_file"); ca != "" {
		if skipVerify {
			return nil, bad("parameter tls_ca_file is ignored with skip_verify=true: drop one")
		}
		pool, err := certfile.CAPool(ca)
		if err != nil {
			return nil, bad("parameter tls_ca_file: %v", err)
		}
		tc.RootCAs = pool
	}
	cert, key := q.Get("tls_cert_file"), q.Get("tls_key_file")
	if (cert == "") != (key == "") {
		return nil, bad("parameters tls_cert_file and tls_key_file go together: give both or neither")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, bad("parameters tls_cert_file and tls_key_file: %v", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

func splitHosts(s string) []string {
	var out []string
	for h := range strings.SplitSeq(s, ",") {
		if h != "" {
			out = append(out, h)
		}
	}
	return out
}
