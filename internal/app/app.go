// Package app composes doclog's roles into one process: the one Postgres
// pool every store shares, the Kafka clients, the model registry, metrics and
// health, and the components of the roles a process runs. `doclog serve`,
// `doclog dev` and `doclogctl bench --embedded` all run it.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/executor/model"
	"github.com/doclog/doclog/executor/model/builtin"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/internal/httpapi"
	"github.com/doclog/doclog/internal/kafka"
	"github.com/doclog/doclog/internal/lagmetrics"
	"github.com/doclog/doclog/internal/telemetry"
	"github.com/doclog/doclog/internal/telemetry/pgxstats"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/pgproj"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/readstore/pgread"
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

	components []component
	groups     []string // the consumer groups this process belongs to, for lag metrics
	closers    []func()
	addrs      map[string]string // what listens where, for `doclog dev` to print
	mu         sync.Mutex
}

// New builds every component of s.Roles; nothing runs until Run.
func New(ctx context.Context, s *Settings, logger *zap.Logger) (*App, error) {
	reg, err := builtin.NewRegistry()
	if err != nil {
		return nil, err
	}
	health, err := telemetry.NewHealth(telemetry.HealthConfig{})
	if err != nil {
		return nil, err
	}
	a := &App{s: s, logger: logger, registry: reg, metrics: telemetry.NewRegistry(), health: health, addrs: map[string]string{}}
	if err := a.build(ctx); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

func (a *App) build(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(a.s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("parsing the database URL: %w", err)
	}
	cfg.MaxConns = a.s.DatabaseMaxConns
	if a.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fmt.Errorf("connecting to Postgres: %w", err)
	}
	a.closers = append(a.closers, a.pool.Close)
	if err := a.pool.Ping(ctx); err != nil {
		return fmt.Errorf("connecting to Postgres: %w", err)
	}
	// The tail cannot pass the oldest open transaction anywhere in the
	// cluster, so its age is what to alert on.
	if err := telemetry.Register(a.metrics, pgxstats.NewPoolCollector(a.pool, "doclog"), pgxstats.NewOldestTransactionCollector(a.pool, 0)); err != nil {
		return err
	}
	a.store = postgres.New(a.pool)
	a.health.AddCheck("postgres", a.store.Ping)
	if a.s.Migrate == "auto" {
		n, err := admin.MigrateAll(ctx, a.store)
		if err != nil {
			return err
		}
		a.logger.Info("schema migrated", zap.Int("applied", n))
	}
	if a.s.CreateTopics && (a.s.runs(RoleIngest) || a.s.runs(RoleExecutor)) {
		if err := a.ensureTopics(ctx); err != nil {
			return err
		}
	}
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
	if a.s.runs(RoleProjectors) {
		if err := a.buildProjectors(ctx); err != nil {
			return err
		}
	}
	if a.s.runs(RoleReadstore) {
		if err := a.buildReadstore(); err != nil {
			return err
		}
	}
	if len(a.groups) > 0 {
		if err := telemetry.Register(a.metrics, lagmetrics.New(a.s.Kafka, a.groups, 0, a.logger)); err != nil {
			return err
		}
	}
	return nil
}

func (a *App) ensureTopics(ctx context.Context) error {
	cl, err := kafka.NewClient(a.s.Kafka, a.logger)
	if err != nil {
		return err
	}
	defer cl.Close()
	states, err := kafka.EnsureTopics(ctx, cl, a.s.Topics)
	if err != nil {
		return fmt.Errorf("ensuring topics: %w", err)
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
	a.health.AddCheck("kafka", func(ctx context.Context) error { return cl.Ping(ctx) })
	srv, err := ingest.NewServer(ingest.Config{
		Addr:          a.s.IngestAddr,
		JobsTopic:     a.names().Jobs,
		BearerTokens:  a.s.AuthTokens,
		JobsRetention: a.s.Topics.JobsRetention,
	}, ingest.Deps{
		Producer:   cl,
		Results:    a.store,
		Registry:   a.registry,
		ReadReady:  readstore.ReadReadiness{Store: pgread.New(a.pool)},
		Logger:     a.logger.Named("ingest"),
		Registerer: a.metrics,
	})
	if err != nil {
		return err
	}
	a.addServer(RoleIngest, srv)
	return nil
}

func (a *App) buildExecutor() error {
	group := a.s.Topics.Prefix + executor.DefaultGroup
	a.groups = append(a.groups, group)
	ex, err := executor.New(executor.Config{
		Store:      a.store,
		Registry:   a.registry,
		Kafka:      a.s.Kafka,
		Topics:     a.names(),
		Group:      group,
		Logger:     a.logger.Named("executor"),
		Registerer: a.metrics,
	})
	if err != nil {
		return err
	}
	a.health.AddCheck("executor", func(context.Context) error { return ex.Ready() })
	a.add(component{
		name: RoleExecutor,
		run:  ex.Run,
		stop: func(context.Context) error { ex.Close(); return nil },
	})
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

func (a *App) buildProjectors(ctx context.Context) error {
	pstore := pgproj.New(a.pool)
	for _, name := range a.s.Projectors {
		group := a.s.Topics.Prefix + projectors.DefaultGroupPrefix + name
		rc := projectors.Config{
			Store:      pstore,
			Log:        a.store,
			Registry:   a.registry,
			Kafka:      a.s.Kafka,
			Topic:      a.names().WriteReady,
			Group:      group,
			Logger:     a.logger.Named("projector." + name),
			Registerer: a.metrics, // the runner labels its series by projector
		}
		switch name {
		case "docview":
			rc.Projector = docview.Projector{}
		case "indexer":
			rc.Projector = indexer.Projector{}
		case "analytics":
			cfg, err := analytics.ParseURL(a.s.ClickHouseURL)
			if err != nil {
				return err
			}
			cfg.Registerer = a.metrics
			ap, err := analytics.New(ctx, cfg, a.logger.Named("analytics"))
			if err != nil {
				return err
			}
			// Closed after the runner stops: closers run after components.
			a.closers = append(a.closers, func() { _ = ap.Close() })
			rc = ap.RunnerConfig(rc)
		}
		r, err := projectors.New(rc)
		if err != nil {
			return fmt.Errorf("building projector %s: %w", name, err)
		}
		a.groups = append(a.groups, group)
		a.health.AddCheck("projector."+name, func(context.Context) error { return r.Ready() })
		a.add(component{
			name: "projector." + name,
			run:  r.Run,
			stop: func(context.Context) error { r.Close(); return nil },
		})
	}
	return nil
}

func (a *App) buildReadstore() error {
	srv, err := readstore.NewServer(readstore.Config{
		Addr:         a.s.ReadstoreAddr,
		BearerTokens: a.s.AuthTokens,
	}, readstore.Deps{
		Store:      pgread.New(a.pool),
		Log:        a.store,
		Registry:   a.registry,
		Logger:     a.logger.Named("readstore"),
		Registerer: a.metrics,
	})
	if err != nil {
		return err
	}
	a.addServer(RoleReadstore, srv)
	return nil
}

func (a *App) add(c component) { a.components = append(a.components, c) }

// addServer runs an API role's HTTP server until the app stops.
func (a *App) addServer(name string, srv *httpapi.Server) {
	a.add(component{
		name: name,
		run: func(ctx context.Context) error {
			if err := srv.Start(ctx); err != nil {
				return err
			}
			a.listening(name, srv.Addr())
			<-ctx.Done()
			return nil
		},
		stop: srv.Stop,
	})
}

func (a *App) listening(name string, addr net.Addr) {
	if addr == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.addrs[name] = addr.String()
}

// Run serves the operator endpoints and runs every component until ctx ends
// or one fails, then stops them all in reverse order.
func (a *App) Run(ctx context.Context, ready func()) error {
	ln, err := net.Listen("tcp", a.s.OpsAddr)
	if err != nil {
		return fmt.Errorf("listening on %s for /healthz, /readyz and /metrics: %w", a.s.OpsAddr, err)
	}
	a.listening("ops", ln.Addr())
	ops := &http.Server{Handler: telemetry.NewMux(a.health, a.metrics), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ops.Serve(ln) }()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, c := range a.components {
		wg.Go(func() {
			if err := c.run(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("%s: %w", c.name, err))
			}
		})
	}
	if ready != nil {
		go func() {
			// Listeners bind early in run; give them a moment, then report.
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) && !a.apisBound() {
				time.Sleep(20 * time.Millisecond)
			}
			ready()
		}()
	}
	<-ctx.Done()
	a.health.Drain()
	stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer stopCancel()
	var errs []error
	for _, c := range slices.Backward(a.components) {
		if err := c.stop(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", c.name, err))
		}
	}
	wg.Wait()
	_ = ops.Shutdown(stopCtx)
	a.close()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		errs = append([]error{cause}, errs...)
	}
	return errors.Join(errs...)
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
