package main

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

// app is the composition root: it owns the one Postgres pool every store
// shares (which is why it, and not a store, imports pgxpool), the Kafka
// clients, the registry, the metrics and the components of the roles.
type app struct {
	s        *settings
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

func newApp(ctx context.Context, s *settings, logger *zap.Logger) (*app, error) {
	reg, err := builtin.NewRegistry()
	if err != nil {
		return nil, err
	}
	health, err := telemetry.NewHealth(telemetry.HealthConfig{})
	if err != nil {
		return nil, err
	}
	a := &app{s: s, logger: logger, registry: reg, metrics: telemetry.NewRegistry(), health: health, addrs: map[string]string{}}
	if err := a.build(ctx); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

func (a *app) build(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(a.s.databaseURL)
	if err != nil {
		return fmt.Errorf("parsing the database URL: %w", err)
	}
	cfg.MaxConns = a.s.databaseMaxConns
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
	if a.s.migrate == "auto" {
		n, err := admin.MigrateAll(ctx, a.store)
		if err != nil {
			return err
		}
		a.logger.Info("schema migrated", zap.Int("applied", n))
	}
	if a.s.topicsMake && (a.s.runs(roleIngest) || a.s.runs(roleExecutor)) {
		if err := a.ensureTopics(ctx); err != nil {
			return err
		}
	}
	if a.s.runs(roleIngest) {
		if err := a.buildIngest(); err != nil {
			return err
		}
	}
	if a.s.runs(roleExecutor) {
		if err := a.buildExecutor(); err != nil {
			return err
		}
	}
	if a.s.runs(roleProjectors) {
		if err := a.buildProjectors(ctx); err != nil {
			return err
		}
	}
	if a.s.runs(roleReadstore) {
		if err := a.buildReadstore(); err != nil {
			return err
		}
	}
	if len(a.groups) > 0 {
		if err := telemetry.Register(a.metrics, lagmetrics.New(a.s.kafka, a.groups, 0, a.logger)); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) ensureTopics(ctx context.Context) error {
	cl, err := kafka.NewClient(a.s.kafka, a.logger)
	if err != nil {
		return err
	}
	defer cl.Close()
	states, err := kafka.EnsureTopics(ctx, cl, a.s.topics)
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

func (a *app) names() kafka.Topics { return kafka.TopicNames(a.s.topics.Prefix) }

func (a *app) buildIngest() error {
	cl, err := kafka.NewClient(a.s.kafka, a.logger, ingest.ProducerOptions()...)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, cl.Close)
	a.health.AddCheck("kafka", func(ctx context.Context) error { return cl.Ping(ctx) })
	srv, err := ingest.NewServer(ingest.Config{
		Addr:          a.s.ingestAddr,
		JobsTopic:     a.names().Jobs,
		BearerTokens:  a.s.authTokens,
		JobsRetention: a.s.topics.JobsRetention,
	}, ingest.Deps{
		Producer:  cl,
		Results:   a.store,
		Registry:  a.registry,
		ReadReady: readstore.ReadReadiness{Store: pgread.New(a.pool)},
		Logger:    a.logger.Named("ingest"),
	})
	if err != nil {
		return err
	}
	a.add(component{
		name: roleIngest,
		run: func(ctx context.Context) error {
			if err := srv.Start(ctx); err != nil {
				return err
			}
			a.listening(roleIngest, srv.Addr())
			<-ctx.Done()
			return nil
		},
		stop: srv.Stop,
	})
	return nil
}

func (a *app) buildExecutor() error {
	group := a.s.topics.Prefix + executor.DefaultGroup
	a.groups = append(a.groups, group)
	ex, err := executor.New(executor.Config{
		Store:    a.store,
		Registry: a.registry,
		Kafka:    a.s.kafka,
		Topics:   a.names(),
		Group:    group,
		Logger:   a.logger.Named("executor"),
	})
	if err != nil {
		return err
	}
	a.health.AddCheck("executor", func(context.Context) error { return ex.Ready() })
	a.add(component{
		name: roleExecutor,
		run:  ex.Run,
		stop: func(context.Context) error { ex.Close(); return nil },
	})
	if a.s.jobResultsRetention > 0 {
		a.add(a.janitor())
	}
	return nil
}

// janitor expires job results older than the retention, hourly.
func (a *app) janitor() component {
	return component{
		name: "job-results-retention",
		run: func(ctx context.Context) error {
			t := time.NewTicker(time.Hour)
			defer t.Stop()
			for {
				n, err := a.store.DeleteJobResultsBefore(ctx, time.Now().Add(-a.s.jobResultsRetention))
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

func (a *app) buildProjectors(ctx context.Context) error {
	pstore := pgproj.New(a.pool)
	for _, name := range a.s.projectors {
		group := a.s.topics.Prefix + projectors.DefaultGroupPrefix + name
		rc := projectors.Config{
			Store:      pstore,
			Log:        a.store,
			Registry:   a.registry,
			Kafka:      a.s.kafka,
			Topic:      a.names().WriteReady,
			Group:      group,
			Logger:     a.logger.Named("projector." + name),
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"projector": name}, a.metrics),
		}
		switch name {
		case "docview":
			rc.Projector = docview.Projector{}
		case "indexer":
			rc.Projector = indexer.Projector{}
		case "analytics":
			cfg, err := analytics.ParseURL(a.s.clickhouseURL)
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

func (a *app) buildReadstore() error {
	srv, err := readstore.NewServer(readstore.Config{
		Addr:         a.s.readstoreAddr,
		BearerTokens: a.s.authTokens,
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
	a.add(component{
		name: roleReadstore,
		run: func(ctx context.Context) error {
			if err := srv.Start(ctx); err != nil {
				return err
			}
			a.listening(roleReadstore, srv.Addr())
			<-ctx.Done()
			return nil
		},
		stop: srv.Stop,
	})
	return nil
}

func (a *app) add(c component) { a.components = append(a.components, c) }

func (a *app) listening(name string, addr net.Addr) {
	if addr == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.addrs[name] = addr.String()
}

// run serves the operator endpoints and runs every component until ctx ends
// or one fails, then stops them all in reverse order.
func (a *app) run(ctx context.Context, ready func()) error {
	ln, err := net.Listen("tcp", a.s.opsAddr)
	if err != nil {
		return fmt.Errorf("listening on %s for /healthz, /readyz and /metrics: %w", a.s.opsAddr, err)
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

func (a *app) apisBound() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ing := a.addrs[roleIngest]
	_, rs := a.addrs[roleReadstore]
	return (ing || !a.s.runs(roleIngest)) && (rs || !a.s.runs(roleReadstore))
}

func (a *app) addr(name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addrs[name]
}

func (a *app) close() {
	for _, c := range slices.Backward(a.closers) {
		c()
	}
	a.closers = nil
}
