package servicecli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/config"
	"github.com/doclog/doclog/internal/localpg"
	"github.com/doclog/doclog/internal/redact"
)

// listenFlags are the addresses --address moves, with the ports dev
// listens on by default.
var listenFlags = []struct{ flag, port string }{
	{"ingest-addr", "8080"}, {"readstore-addr", "8081"}, {"ops-addr", "9090"},
}

func newDevCmd(out io.Writer) *cobra.Command {
	s := &app.Settings{}
	var dataDir, address, contextName string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run every role in one process with an in-process Kafka and a local Postgres",
		Long: `Run every role in one process: an in-process Kafka (franz-go's kfake), a local
Postgres that doclog initialises and starts itself unless DATABASE_URL is set,
and ClickHouse analytics when CLICKHOUSE_URL is set. The Postgres cluster and
the Kafka log persist in --data-dir between runs (default: doclog/dev under
the user's cache directory, such as ~/.cache/doclog/dev), a directory only
this user may enter; the local Postgres asks for a password, which doclog
generates and keeps in a file only its owner can read.

The ingest (8080), readstore (8081) and ops (9090) ports listen on 127.0.0.1,
so nothing beyond this machine reaches them. --address 0.0.0.0 opens all three
(like kubectl port-forward --address); --ingest-addr, --readstore-addr and
--ops-addr, when given, win over it. Without bearer tokens the APIs answer
anyone who reaches them: doclog dev warns when that is beyond this machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			// The Kafka log, the server log and whatever else this process
			// writes are for this user alone (kfake writes 0644 files).
			syscall.Umask(0o077)
			if err := fromEnv(cmd, s); err != nil {
				return err
			}
			if err := listenOn(cmd.Flags(), address); err != nil {
				return err
			}
			if dataDir == "" {
				var err error
				if dataDir, err = defaultDataDir(); err != nil {
					return err
				}
			}
			if err := localpg.PrivateDir(dataDir); err != nil {
				return err
			}

			var pg *localpg.Server
			if s.DatabaseURL == "" {
				var err error
				if pg, err = localpg.Start(ctx, localpg.Config{DataDir: filepath.Join(dataDir, "pg")}); err != nil {
					return err
				}
				defer func() { _ = pg.Stop(context.WithoutCancel(ctx)) }()
				s.DatabaseURL = pg.URL()
			}

			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(int(s.Topics.JobsPartitions)),
				kfake.DataDir(filepath.Join(dataDir, "kafka")))
			if err != nil {
				return fmt.Errorf("starting the in-process Kafka: %w", err)
			}
			defer cluster.Close()
			s.Kafka.Seeds = cluster.ListenAddrs()
			s.Topics.ReplicationFactor, s.Topics.MinInsyncReplicas = 1, 1

			if err := validate(s); err != nil {
				return err
			}
			logger, err := newLogger(s)
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			applyGCPercent(cmd, s, logger)
			a, err := app.New(ctx, s, logger)
			if err != nil {
				return err
			}
			return a.Run(ctx, func() {
				scheme := "http://"
				if s.TLS.CertFile != "" {
					scheme = "https://"
				}
				note := writeDevContext(cmd.Flags(), contextName, s, a, scheme)
				banner(out, logger, a, s, dataDir, pg, note)
			})
		},
	}
	app.BindFlags(cmd.Flags(), s)
	bindConfigFlag(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&contextName, devContextFlag, "dev", "doclogctl context to write this instance's addresses to, in the file --config or DOCLOG_CONFIG names, else doclog/config.yaml in the user's config directory; it becomes current when none is (empty: none)")
	f.StringVar(&dataDir, "data-dir", "", "keep Postgres and Kafka data here between runs (default: doclog/dev under the user's cache directory)")
	f.StringVar(&address, "address", "127.0.0.1", "host the ingest, readstore and ops ports listen on unless their own flag is given (0.0.0.0 or :: for every interface)")
	// Development defaults: everything migrates itself, logs read well in a
	// terminal, a few partitions are plenty on one machine, and the ports
	// stay on this machine.
	defaults := map[string]string{"migrate": "auto", "log-encoding": "console", "topics-jobs-partitions": "4"}
	for _, l := range listenFlags {
		defaults[l.flag] = net.JoinHostPort("127.0.0.1", l.port)
	}
	for name, v := range defaults {
		_ = f.Set(name, v)
		fl := f.Lookup(name)
		fl.DefValue, fl.Changed = fl.Value.String(), false
	}
	config.AnnotateUsage(f)
	return cmd
}

// listenOn moves the listen addresses not given explicitly to host.
func listenOn(fs *pflag.FlagSet, host string) error {
	if !fs.Changed("address") {
		return nil
	}
	host = strings.Trim(host, "[]")
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return fmt.Errorf("--address takes a host or an IP address, not %q: give a port with --ingest-addr, --readstore-addr or --ops-addr", host)
	}
	for _, l := range listenFlags {
		if !fs.Changed(l.flag) {
			_ = fs.Set(l.flag, net.JoinHostPort(host, l.port))
		}
	}
	return nil
}

// defaultDataDir is doclog/dev in the user's cache directory: the user's
// own, unlike the shared temporary directory, where another user could
// plant a directory or a link under a name known in advance.
func defaultDataDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding a data directory (give --data-dir): %w", err)
	}
	return filepath.Join(cache, "doclog", "dev"), nil
}

// banner says what listens where, what the APIs let in, and how to start.
func banner(out io.Writer, logger *zap.Logger, a *app.App, s *app.Settings, dataDir string, pg *localpg.Server, contextNote string) {
	fmt.Fprintf(out, "doclog dev is running (data in %s)\n", dataDir)
	api, ops := "http://", "http://"
	if s.TLS.CertFile != "" {
		api = "https://"
		if s.OpsTLS {
			ops = "https://"
		}
	}
	type port struct{ name, scheme, addr, suffix string }
	ports := []port{{name: "ingest", scheme: api, addr: a.Addr(app.RoleIngest)}}
	if addr := a.Addr(app.RoleReadstore); addr != "" {
		ports = append(ports, port{name: "readstore", scheme: api, addr: addr})
	}
	ports = append(ports, port{name: "ops", scheme: ops, addr: a.Addr("ops"), suffix: "  (/metrics, /readyz, /healthz)"})
	var open, openAPIs []string
	for _, p := range ports {
		reach := reachOf(p.addr)
		line := fmt.Sprintf("  %-10s %s%s%s", p.name, p.scheme, localAddr(p.addr), p.suffix)
		if reach != "" {
			line += fmt.Sprintf("  [listening on %s: %s]", reach, p.addr)
			open = append(open, p.name+" "+p.addr)
			if p.name != "ops" {
				openAPIs = append(openAPIs, p.name)
			}
		}
		fmt.Fprintln(out, line)
	}
	pgLine := redact.URL(s.DatabaseURL)
	if pg != nil {
		pgLine += fmt.Sprintf("  (password in %s)", pg.PasswordFile())
	}
	fmt.Fprintf(out, "  %-10s %s\n", "postgres", pgLine)
	if s.ClickHouseURL != "" {
		fmt.Fprintf(out, "  %-10s %s\n", "clickhouse", redact.URL(s.ClickHouseURL))
	}
	fmt.Fprintf(out, "  %-10s %s (in-process, loopback only)\n", "kafka", strings.Join(s.Kafka.Seeds, ","))
	if len(open) == 0 {
		fmt.Fprintln(out, "Every port listens on loopback only: nothing beyond this machine reaches them (--address 0.0.0.0 opens them).")
	} else {
		fmt.Fprintf(out, "Listening beyond loopback: %s.\n", strings.Join(open, ", "))
	}
	switch {
	case !s.AuthOff():
		fmt.Fprintln(out, "Authentication is on: the APIs want a bearer token (Authorization: Bearer <token>).")
	case len(openAPIs) > 0:
		apis := "the " + openAPIs[0] + " API listens"
		if len(openAPIs) > 1 {
			apis = "the " + strings.Join(openAPIs, " and ") + " APIs listen"
		}
		fmt.Fprintf(out, "WARNING: authentication is off and %s beyond loopback: anyone who can reach this machine can submit and read every document. Give --auth-write-tokens (and --auth-read-tokens), or listen on 127.0.0.1.\n", apis)
		logger.Warn("the APIs listen beyond loopback with authentication off: anyone who reaches them can submit and read every document",
			zap.Strings("listening", open))
	default:
		fmt.Fprintln(out, "Authentication is off (no bearer tokens): any user or process on this machine can call the APIs; give --auth-write-tokens before opening the ports.")
	}
	if contextNote != "" {
		fmt.Fprintln(out, contextNote)
	}
	ingestURL := api + localAddr(a.Addr(app.RoleIngest))
	bearer := ""
	if !s.AuthOff() {
		bearer = " -H 'Authorization: Bearer <token>'"
	}
	fmt.Fprintf(out, "Try:\n  curl -s -X POST %s/v1/documents%s -H 'Content-Type: application/json' -d '{\"documentType\":\"doclog/json\",\"name\":\"hello\"}'\n", ingestURL, bearer)
	fmt.Fprintf(out, "then follow the statusUrl it returns with ?wait=5s. Ctrl-C stops doclog.\n")
	logger.Info("doclog dev ready", zap.String("ingest", ingestURL))
}

// reachOf says how far beyond this machine a bound address reaches: "" for
// loopback, "every interface" for a wildcard, else the interface's address.
func reachOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "an unknown interface"
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return "interface " + host
	case ip.IsLoopback():
		return ""
	case ip.IsUnspecified():
		return "every interface"
	default:
		return "interface " + host
	}
}

// localAddr turns ":8080" or "[::]:8080" into "127.0.0.1:8080" for printing.
func localAddr(addr string) string {
	if i := strings.LastIndex(addr, ":"); i >= 0 {
		host := addr[:i]
		if host == "" || host == "[::]" || host == "0.0.0.0" {
			return "127.0.0.1" + addr[i:]
		}
	}
	return addr
}
