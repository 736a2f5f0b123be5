// Package app composes doclog's roles into one process: the one Postgres
// pool every store shares, the Kafka clients, the model registry, metrics and
// health, and the components of the roles a process runs. `doclog serve`,
// `doclog dev`, `doclogctl bench --embedded` and the serve of a worker
// binary (package worker) all run it.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/executor/cache"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/internal/certfile"
	"github.com/doclog/doclog/internal/depwait"
	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/internal/lagmetrics"
	"github.com/doclog/doclog/internal/telemetry"
	"github.com/doclog/doclog/internal/telemetry/pgxstats"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/catalog"
	"github.com/doclog/doclog/projectors/pgproj"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/readstore/pgread"
	"github.com/doclog/doclog/signing"
)

// component is one long-running part of the process. run blocks until ctx
// ends or the part fails; stop makes it return and releases what it holds.
type component struct {
	name string
	run  func(ctx context.Context) error
	stop func(ctx context.Context) error
}

// App is the composition root: it owns the one Postgres pool every store
// shares (which is why it, and not a store, imports pgxpool), the Kafka
// clients, the registry, the metrics and the components of the roles.
type App struct {
	s        *Settings
	logger   *zap.Logger
	registry *model.Registry
	metrics  *prometheus.Registry
	health   *telemetry.Health

	pool  *pgxpool.Pool
	store *postgres.Store

	kafka     *kgo.Client       // topics and the kafka readiness check; nil when no role uses Kafka
	analytics *clickHouse       // nil without the analytics projector
	tls       *tls.Config       // the API ports' TLS; nil serves plain HTTP
	verifier  *signing.Verifier // checks action signatures; nil when no policy does

	components []component
	groups     []string // the consumer groups this process belongs to, for lag metrics
	closers    []func()
	addrs      map[string]string // what listens where, for `doclog dev` to print
	mu         sync.Mutex
}

// New prepares the process for s.Roles: the Postgres pool, the metrics and
// what the settings name. It reaches no server: the dependencies are waited
// for in Run, which then builds and starts the components, so only what no
// wait can cure (a malformed URL, an unreadable certificate) fails here. ctx
// is not used.
func New(_ context.Context, s *Settings, logger *zap.Logger) (*App, error) {
	reg, err := catalog.Registry()
	if err != nil {
		return nil, err
	}
	health, err := telemetry.NewHealth(telemetry.HealthConfig{})
	if err != nil {
		return nil, err
	}
	a := &App{s: s, logger: logger, registry: reg, metrics: telemetry.NewRegistry(), health: health, addrs: map[string]string{}}
	if err := a.build(); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

func (a *App) build() error {
	cfg, err := a.s.PoolConfig()
	if err != nil {
		return err
	}
	// The pool connects on first use, so creating it needs no server.
	if a.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
		return fmt.Errorf("creating the Postgres pool: %w", err)
	}
	a.closers = append(a.closers, a.pool.Close)
	// The tail cannot pass the oldest open transaction anywhere in the
	// cluster, so its age is what to alert on.
	if err := telemetry.Register(a.metrics, pgxstats.NewPoolCollector(a.pool, "doclog"), pgxstats.NewOldestTransactionCollector(a.pool, 0)); err != nil {
		return err
	}
	a.store = postgres.New(a.pool, postgres.WithCopyThreshold(a.s.Tuning.copyThreshold()))
	if a.s.TLS.CertFile != "" {
		if a.tls, err = certfile.ServerConfig(a.s.TLS, 0, a.logger.Named("tls")); err != nil {
			return err
		}
	}
	if a.s.runs(RoleIngest) || a.s.runs(RoleExecutor) {
		if a.verifier, err = a.s.Signatures.verifier(); err != nil {
			return err
		}
	}
	if a.usesKafka() {
		// One client for the topics and the kafka readiness check, without
		// a logger: the wait logs the outage at its own pace, where the
		// client would log every dial.
		if a.kafka, err = kafka.NewClient(a.s.Kafka, nil); err != nil {
			return err
		}
		a.closers = append(a.closers, a.kafka.Close)
	}
	var inClickHouse []catalog.Spec
	for _, name := range a.s.Projectors {
		if spec, _ := catalog.Lookup(name); spec.ClickHouse && a.s.runs(RoleProjectors) {
			inClickHouse = append(inClickHouse, spec)
		}
	}
	if len(inClickHouse) > 0 {
		cfg, err := analytics.ParseURL(a.s.ClickHouseURL)
		if err != nil {
			return err
		}
		cfg = a.s.analyticsTuning(cfg)
		cfg.Registerer = a.metrics
		if err := cfg.WithDefaults().Validate(); err != nil {
			return err
		}
		a.analytics = &clickHouse{cfg: cfg, logger: a.logger, specs: inClickHouse}
		// Closed after the runners stop: closers run after components.
		a.closers = append(a.closers, a.analytics.close)
	}
	if a.s.runs(RoleExecutor) {
		a.groups = append(a.groups, a.s.Topics.Prefix+executor.DefaultGroup)
	}
	if a.s.runs(RoleProjectors) {
		for _, name := range a.s.Projectors {
			a.groups = append(a.groups, a.s.Topics.Prefix+projectors.DefaultGroupPrefix+name)
		}
	}
	if len(a.groups) > 0 {
		if err := telemetry.Register(a.metrics, lagmetrics.New(a.s.Kafka, a.groups, 0, a.logger)); err != nil {
			return err
		}
	}
	return nil
}

// buildComponents builds the components of the roles. Run calls it once the
// dependencies answer: a consumer's Kafka client joins its group as soon as
// it exists, and a member that joined while it waits for Postgres would hold
// partitions it cannot work on.
func (a *App) buildComponents() error {
	if a.s.runs(RoleIngest) {
		if err := a.buildIngest(); err != nil {
			return err
		}
	}
	if a.s.runs(RoleExecutor) {
		if err := a.buildExecutor(); err != nil {
			return err
		}
	}
	if a.verifier != nil {
		a.add(a.signatureKeysWatch())
	}
	if a.s.runs(RoleProjectors) {
		if err := a.buildProjectors(); err != nil {
			return err
		}
	}
	if a.s.runs(RoleReadstore) {
		if err := a.buildReadstore(); err != nil {
			return err
		}
	}
	return nil
}

// usesKafka reports whether a role of the process talks to the brokers; the
// readstore alone does not.
func (a *App) usesKafka() bool {
	return a.s.runs(RoleIngest) || a.s.runs(RoleExecutor) || a.s.runs(RoleProjectors)
}

// dependencies are what the process waits for in Run before it starts its
// components, each with the readiness check that replaces its wait.
func (a *App) dependencies() []dependency {
	deps := []dependency{{
		Dependency: depwait.Dependency{Name: "postgres", Probe: a.store.Ping, Setup: a.migrate},
		check:      a.store.Ping,
	}}
	if a.usesKafka() {
		deps = append(deps, dependency{
			Dependency: depwait.Dependency{Name: "kafka", Probe: a.kafka.Ping, Setup: a.ensureTopics},
			check:      a.kafka.Ping,
		})
	}
	if a.analytics != nil {
		deps = append(deps, dependency{
			Dependency: depwait.Dependency{Name: "clickhouse", Setup: a.analytics.connect},
			check:      a.analytics.ping,
		})
	}
	return deps
}

type dependency struct {
	depwait.Dependency
	check telemetry.CheckFunc
}

// migrate applies every migration when --migrate=auto. A failure while the
// server answers is the migration's own and ends the start; one while it
// does not is the outage again, and the wait goes on.
func (a *App) migrate(ctx context.Context) error {
	if a.s.Migrate != "auto" {
		return nil
	}
	n, err := admin.MigrateAll(ctx, a.store)
	if err != nil {
		err = fmt.Errorf("migrating the schema: %w", err)
		if a.store.Ping(ctx) == nil {
			return depwait.Permanent(err)
		}
		return err
	}
	// The counts migrate status and doclogctl status report: every
	// Postgres migration, the log's and the projectors'.
	statuses, err := admin.MigrationStatuses(ctx, a.store)
	if err != nil {
		return fmt.Errorf("listing migrations: %w", err)
	}
	applied, known := admin.MigrationCounts(statuses)
	a.logger.Info("schema migrated", zap.Int("applied_now", n), zap.String("migrations", fmt.Sprintf("%d/%d applied", applied, known)))
	return nil
}

// ensureTopics creates the missing topics with --topics-create. A partition
// count that differs from the configured one is permanent: the count is
// fixed for a topic's life. Other failures are retried, since a broker that
// just started may not yet know all its peers.
func (a *App) ensureTopics(ctx context.Context) error {
	if !a.s.CreateTopics {
		return nil
	}
	states, err := kafka.EnsureTopics(ctx, a.kafka, a.s.Topics)
	if err != nil {
		err = fmt.Errorf("ensuring topics: %w", err)
		var mismatch *kafka.PartitionMismatchError
		if errors.As(err, &mismatch) {
			return depwait.Permanent(err)
		}
		return err
	}
	for _, st := range states {
		if st.Created {
			a.logger.Info("topic created", zap.String("topic", st.Spec.Name), zap.Int32("partitions", st.Partitions))
		}
	}
	return nil
}

func (a *App) names() kafka.Topics { return kafka.TopicNames(a.s.Topics.Prefix) }

func (a *App) buildIngest() error {
	cl, err := kafka.NewClient(a.s.Kafka, a.logger, ingest.ProducerOptions()...)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, cl.Close)
	ic := a.s.Tuning.Ingest
	ic.Addr, ic.JobsTopic, ic.TLS = a.s.IngestAddr, a.names().Jobs, a.tls
	ic.BearerTokens, ic.ReadTokens = a.s.writeTokens(), a.s.AuthReadTokens
	ic.JobsRetention = a.s.Topics.JobsRetention
	// The executor group's backlog is measured through the producer's
	// client, once per interval for every request (ingest.Config).
	backlog, err := kafka.NewBacklogWatcher(kafka.BacklogConfig{Client: cl, Group: a.s.Topics.Prefix + executor.DefaultGroup,
		Topic: ic.JobsTopic, Interval: ic.WithDefaults().ExecutorLagInterval, MaxAge: ic.WithDefaults().MaxExecutorLag,
		Logger: a.logger.Named("ingest")})
	if err != nil {
		return err
	}
	srv, err := ingest.NewServer(ic, ingest.Deps{
		Producer:   cl,
		Backlog:    backlog,
		Results:    a.store,
		Registry:   a.registry,
		Signatures: a.signatures(),
		ReadReady:  readstore.ReadReadiness{Store: pgread.New(a.pool)},
		Logger:     a.logger.Named("ingest"),
		Registerer: a.metrics,
	})
	if err != nil {
		return err
	}
	a.add(component{name: "ingest-backlog", run: func(ctx context.Context) error {
		if err := backlog.Start(ctx); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}, stop: backlog.Stop})
	a.addServer(RoleIngest, a.apiAddrFlag("--ingest-addr"), srv)
	return nil
}

func (a *App) buildExecutor() error {
	ec := a.s.Tuning.Executor.WithDefaults()
	ec.Store, ec.Registry = a.store, a.registry
	ec.Kafka, ec.Topics, ec.Group = a.s.Kafka, a.names(), a.s.Topics.Prefix+executor.DefaultGroup
	ec.Logger, ec.Registerer = a.logger.Named("executor"), a.metrics
	ec.Signatures = a.signatures()
	cc := a.s.Tuning.Cache
	cc.KeyframeInterval = ec.KeyframeInterval
	wc, err := cache.New(a.store, a.registry, cc)
	if err != nil {
		return fmt.Errorf("creating the write cache: %w", err)
	}
	ec.Cache = wc
	ex, err := executor.New(ec)
	if err != nil {
		return err
	}
	a.health.AddCheck("executor", func(context.Context) error { return safeUnavailable(ex.Ready()) })
	a.add(consumer(RoleExecutor, ex))
	if a.s.JobResultsRetention > 0 {
		a.add(a.janitor())
	}
	return nil
}

// janitor expires job results older than the retention, hourly.
func (a *App) janitor() component {
	return component{
		name: "job-results-retention",
		run: func(ctx context.Context) error {
			t := time.NewTicker(time.Hour)
			defer t.Stop()
			for {
				n, err := a.store.DeleteJobResultsBefore(ctx, time.Now().Add(-a.s.JobResultsRetention))
				if err != nil && ctx.Err() == nil {
					a.logger.Warn("expiring job results failed; retrying in an hour", zap.Error(err))
				} else if n > 0 {
					a.logger.Info("expired job results", zap.Int64("deleted", n))
				}
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		},
		stop: func(context.Context) error { return nil },
	}
}

func (a *App) buildProjectors() error {
	pstore := pgproj.New(a.pool)
	// The projectors all consume the write-ready topic: each record is
	// decoded once for all of them.
	shared := projectors.NewSharedDecode(len(a.s.Projectors), 0)
	for _, name := range a.s.Projectors {
		spec, err := catalog.Lookup(name)
		if err != nil {
			return err
		}
		rc := a.s.Tuning.Projectors
		rc.Store, rc.Log, rc.Registry = pstore, a.store, a.registry
		rc.Kafka, rc.Topic = a.s.Kafka, a.names().WriteReady
		rc.Group = a.s.Topics.Prefix + projectors.DefaultGroupPrefix + name
		rc.Logger = a.logger.Named("projector." + name)
		rc.Registerer = a.metrics // the runner labels its series by projector
		rc.SharedDecode = shared
		if spec.ClickHouse {
			rc.Projector = a.analytics.opened[name]
		} else {
			p, closeP, err := spec.Open(context.Background(), catalog.Options{Logger: rc.Logger})
			if err != nil {
				return fmt.Errorf("opening projector %s: %w", name, err)
			}
			rc.Projector = p
			a.closers = append(a.closers, closeP)
		}
		if c, ok := rc.Projector.(projectors.RunnerConfigurer); ok {
			// Such a projector sizes its own polls (analytics: to
			// --analytics-batch-rows), which RunnerConfig applies to a
			// runner that names none.
			rc.MaxPollRecords = 0
			rc = c.RunnerConfig(rc)
		}
		if err := a.addProjector(name, rc); err != nil {
			return err
		}
	}
	return nil
}

func (a *App) addProjector(name string, rc projectors.Config) error {
	rc.Start = a.s.projectorStart(name)
	r, err := projectors.New(rc)
	if err != nil {
		return fmt.Errorf("building projector %s: %w", name, err)
	}
	a.health.AddCheck("projector."+name, func(context.Context) error { return r.Ready() })
	a.add(consumer("projector."+name, r))
	return nil
}

func (a *App) buildReadstore() error {
	rc := a.s.Tuning.Readstore
	rc.Addr, rc.TLS = a.s.ReadstoreAddr, a.tls
	rc.BearerTokens, rc.ReadTokens = a.s.writeTokens(), a.s.AuthReadTokens
	srv, err := readstore.NewServer(rc, readstore.Deps{
		Store:      pgread.New(a.pool),
		Log:        a.store,
		Registry:   a.registry,
		Logger:     a.logger.Named("readstore"),
		Registerer: a.metrics,
	})
	if err != nil {
		return err
	}
	a.addServer(RoleReadstore, a.apiAddrFlag("--readstore-addr"), srv)
	return nil
}

func (a *App) add(c component) { a.components = append(a.components, c) }

// service is a consumer's lifecycle: the executor's and the runners'.
type service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	Done() <-chan struct{}
	Err() error
}

// consumer runs a service as a component: its run returns the service's
// error when it stopped on its own. The end of ctx starts the stop at once,
// beside the other components', rather than when the app's stop reaches
// it. Neither stop is bounded by the app's: a consumer bounds its own (the
// executor's in-flight batch by its ShutdownTimeout), and the pool it
// writes through must outlive it.
func consumer(name string, s service) component {
	return component{
		name: name,
		run: func(ctx context.Context) error {
			if err := s.Start(ctx); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return s.Stop(context.WithoutCancel(ctx))
			case <-s.Done():
				return s.Err()
			}
		},
		stop: func(ctx context.Context) error { return s.Stop(context.WithoutCancel(ctx)) },
	}
}

// addServer runs an API role's HTTP server until the app stops; a failure
// to bind its address names setting, the flag that chose it.
// server is an API's server: ingest's and the read store's, the ops one.
type server interface {
	Start(ctx context.Context) error
	Addr() net.Addr
	Stop(ctx context.Context) error
}

func (a *App) addServer(name, setting string, srv server) {
	a.add(component{
		name: name,
		run: func(ctx context.Context) error {
			if err := srv.Start(ctx); err != nil {
				return httpapi.NameSetting(err, setting)
			}
			a.listening(name, srv.Addr())
			<-ctx.Done()
			return nil
		},
		stop: srv.Stop,
	})
}

// apiAddrFlag is the flag that chose an API role's address: --http-addr
// when given, else the role's own.
func (a *App) apiAddrFlag(own string) string {
	if a.s.HTTPAddr != "" {
		return "--http-addr"
	}
	return own
}

func (a *App) listening(name string, addr net.Addr) {
	if addr == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.addrs[name] = addr.String()
}

// Run serves the operator endpoints at once, waits for Postgres, Kafka and
// ClickHouse (those the roles use) while /readyz names what it waits for,
// migrates and creates topics as configured, then runs every component until
// ctx ends or one fails, and stops them all in reverse order. ready is called
// once the components run and the APIs are bound. A stop during the wait
// returns nil, like any other stop.
func (a *App) Run(ctx context.Context, ready func()) error {
	ln, err := net.Listen("tcp", a.s.OpsAddr)
	if err != nil {
		_ = a.stop(context.WithoutCancel(ctx))
		a.close()
		return &httpapi.ListenError{Server: "ops", Addr: a.s.OpsAddr, Setting: "--ops-addr", Err: err}
	}
	a.listening("ops", ln.Addr())
	a.logger.Info("operator endpoints listening", zap.String("addr", ln.Addr().String()))
	ops := httpapi.NewHTTPServer(httpapi.ServerConfig{ReadHeaderTimeout: 10 * time.Second, TLS: a.opsTLS()}, telemetry.NewMux(a.health, a.metrics), a.logger)
	go func() { _ = httpapi.Serve(ops, ln) }()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	if err := a.start(ctx, &wg, cancel); err != nil {
		cancel(err)
	} else if ready != nil {
		wg.Go(func() {
			// Listeners bind early in run; give them a moment, then report.
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) && !a.apisBound() && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
			}
			if ctx.Err() == nil {
				ready()
			}
		})
	}
	<-ctx.Done()
	a.health.Drain()
	stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer stopCancel()
	err = a.stop(stopCtx)
	wg.Wait()
	_ = ops.Shutdown(stopCtx)
	a.close()
	errs := []error{err}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		errs = append([]error{cause}, errs...)
	}
	return errors.Join(errs...)
}

// stop stops every component in reverse order, those that never ran too:
// that releases their clients.
func (a *App) stop(ctx context.Context) error {
	var errs []error
	for _, c := range slices.Backward(a.components) {
		if err := c.stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// start waits for the dependencies, builds what needed them and starts every
// component; a component that fails cancels ctx with its error.
func (a *App) start(ctx context.Context, wg *sync.WaitGroup, cancel context.CancelCauseFunc) error {
	startup := a.health.AddGate("startup")
	if err := a.await(ctx, startup); err != nil {
		return err
	}
	if err := a.buildComponents(); err != nil {
		return err
	}
	for _, c := range a.components {
		wg.Go(func() {
			if err := c.run(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("%s: %w", c.name, err))
			}
		})
	}
	startup.Pass()
	return nil
}

// await waits for every dependency at once, so /readyz names all that are
// down rather than the first. Each one's wait is reported by a readiness
// check of its name, replaced by the dependency's own check once it
// answers; the startup gate lists those still waited for. The first
// permanent failure ends every wait.
func (a *App) await(ctx context.Context, startup *telemetry.Gate) error {
	deps := a.dependencies()
	var mu sync.Mutex
	waiting := map[string]bool{}
	report := func() {
		if len(waiting) == 0 {
			startup.Fail(errors.New("starting the components"))
			return
		}
		names := slices.Sorted(maps.Keys(waiting))
		startup.Fail(fmt.Errorf("starting: waiting for %s", strings.Join(names, ", ")))
	}
	for i := range deps {
		waiting[deps[i].Name] = true
		gate := a.health.AddGate(deps[i].Name)
		gate.Fail(fmt.Errorf("waiting for %s", deps[i].Name))
		deps[i].Waiting = gate.Fail
	}
	report()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, d := range deps {
		wg.Go(func() {
			if err := depwait.Wait(ctx, a.s.Wait, d.Dependency, a.logger.Named("startup")); err != nil {
				cancel(err)
				return
			}
			a.health.AddCheck(d.Name, safeCheck(d.check))
			mu.Lock()
			delete(waiting, d.Name)
			report()
			mu.Unlock()
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// safeUnavailable keeps the executor's report of an outage but gives the
// dependency's error by its reason alone, as safeCheck does.
func safeUnavailable(err error) error {
	var ue *executor.UnavailableError
	if errors.As(err, &ue) {
		return fmt.Errorf("a dependency is unavailable since %s: %s", ue.Since.UTC().Format(time.RFC3339), depwait.Reason(ue.Err))
	}
	return err
}

// safeCheck reports a dependency's failure by depwait.Reason alone: /readyz
// answers anyone who reaches the ops port, and driver errors name the
// server's address and the database user.
func safeCheck(check telemetry.CheckFunc) telemetry.CheckFunc {
	return func(ctx context.Context) error {
		if err := check(ctx); err != nil {
			return errors.New(depwait.Reason(err))
		}
		return nil
	}
}

// opsTLS is the ops port's TLS with --ops-tls-enabled: the APIs' pair,
// without asking for a client certificate, since kubelet probes and most
// scrapers present none (the port carries health and metrics, no data).
func (a *App) opsTLS() *tls.Config {
	if !a.s.OpsTLS || a.tls == nil {
		return nil
	}
	tc := a.tls.Clone()
	tc.ClientAuth, tc.ClientCAs = tls.NoClientCert, nil
	return tc
}

func (a *App) apisBound() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ing := a.addrs[RoleIngest]
	_, rs := a.addrs[RoleReadstore]
	return (ing || !a.s.runs(RoleIngest)) && (rs || !a.s.runs(RoleReadstore))
}

// Addr is where the named listener (ingest, readstore, ops) is bound, "" if
// it is not (yet).
func (a *App) Addr(name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addrs[name]
}

func (a *App) close() {
	for _, c := range slices.Backward(a.closers) {
		c()
	}
	a.closers = nil
}
