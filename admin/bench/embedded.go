package bench

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/doclog/doclog/admin"
	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/executor/model"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/internal/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/pgproj"
)

// embeddedPoolSize is the roles' Postgres pool, doclog's default
// (--database-max-conns).
const embeddedPoolSize = 20

// embedded is doclog's write path composed in this process the way
// `doclog serve` composes it (cmd/doclog/app.go): ingest, the executor and
// the docview and indexer projectors, on a pool of their own so that their
// database sessions are theirs alone. Analytics (ClickHouse) is left out:
// the targets of issue 7 are stated without it.
type embedded struct {
	store    *postgres.Store
	producer *kgo.Client
	srv      *ingest.Server
	names    kafka.Topics
	kcfg     kafka.Config
	logger   *zap.Logger

	stops    []func()
	wg       sync.WaitGroup
	failed   chan error
	errMu    sync.Mutex
	firstErr error
	once     sync.Once
}

// startEmbedded migrates the database, creates topics under a fresh prefix
// (so a run never consumes an earlier run's backlog) and starts the roles.
func startEmbedded(ctx context.Context, cfg Config, reg *model.Registry) (_ *embedded, err error) {
	e := &embedded{kcfg: cfg.Kafka, logger: cfg.Logger, failed: make(chan error, 8)}
	defer func() {
		if err != nil {
			e.stop()
		}
	}()
	if e.store, err = postgres.Open(ctx, withPoolSize(cfg.DatabaseURL, embeddedPoolSize)); err != nil {
		return nil, err
	}
	if _, err := admin.MigrateAll(ctx, e.store); err != nil {
		return nil, fmt.Errorf("migrating the database: %w", err)
	}
	prefix := cfg.TopicPrefix + "bench-" + uuid.NewString()[:8] + "."
	e.names = kafka.TopicNames(prefix)
	if e.producer, err = kafka.NewClient(cfg.Kafka, cfg.Logger.Named("kafka"), ingest.ProducerOptions()...); err != nil {
		return nil, err
	}
	if _, err := kafka.EnsureTopics(ctx, e.producer, kafka.TopicsConfig{Prefix: prefix, JobsPartitions: cfg.Partitions}); err != nil {
		return nil, fmt.Errorf("creating the benchmark's topics: %w", err)
	}
	view := docview.NewView(e.store.Pool(), pgproj.New(e.store.Pool()))
	if e.srv, err = ingest.NewServer(ingest.Config{Addr: "127.0.0.1:0", JobsTopic: e.names.Jobs},
		ingest.Deps{Producer: e.producer, Results: e.store, Registry: reg, ReadReady: viewReadiness{view}, Logger: cfg.Logger.Named("ingest")}); err != nil {
		return nil, err
	}
	if err := e.srv.Start(ctx); err != nil {
		return nil, err
	}
	e.stops = append(e.stops, func() { _ = e.srv.Stop(context.Background()) })

	ex, err := executor.New(executor.Config{Store: e.store, Registry: reg, Kafka: cfg.Kafka, Topics: e.names,
		Group: prefix + executor.DefaultGroup, Logger: cfg.Logger.Named("executor")})
	if err != nil {
		return nil, err
	}
	e.goRun("executor", ex.Run, ex.Close)
	for _, p := range []projectors.Projector{docview.Projector{}, indexer.Projector{}} {
		r, err := projectors.New(projectors.Config{Projector: p, Store: pgproj.New(e.store.Pool()), Log: e.store, Registry: reg,
			Kafka: cfg.Kafka, Topic: e.names.WriteReady, Group: prefix + projectors.DefaultGroupPrefix + p.Name(),
			Logger: cfg.Logger.Named("projector." + p.Name())})
		if err != nil {
			return nil, fmt.Errorf("building projector %s: %w", p.Name(), err)
		}
		e.goRun("projector "+p.Name(), r.Run, r.Close)
	}
	return e, nil
}

// goRun runs a role until it is closed; a role that ends on its own is a
// failure of the run.
func (e *embedded) goRun(name string, run func(context.Context) error, closeFn func()) {
	e.stops = append(e.stops, closeFn)
	e.wg.Go(func() {
		if err := run(context.Background()); err != nil {
			e.failed <- fmt.Errorf("%s: %w", name, err)
		}
	})
}

func (e *embedded) ingestURL() string { return "http://" + e.srv.Addr().String() }

// stop closes the roles in reverse order, deletes the run's topics and
// closes the roles' pool, which ends their database sessions (and so
// flushes their statistics). Stopping twice is harmless.
func (e *embedded) stop() {
	e.once.Do(func() {
		for i := len(e.stops) - 1; i >= 0; i-- {
			e.stops[i]()
		}
		e.wg.Wait()
		if e.producer != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, err := kadm.NewClient(e.producer).DeleteTopics(ctx, e.names.All()...); err != nil {
				e.logger.Warn("deleting the benchmark's topics failed", zap.Error(err))
			}
			cancel()
			e.producer.Close()
		}
		if e.store != nil {
			e.store.Close()
		}
	})
}

// err returns the first role failure, if a role has ended; it keeps
// returning it, so every phase of the run sees it.
func (e *embedded) err() error {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	if e.firstErr == nil {
		select {
		case e.firstErr = <-e.failed:
		default:
		}
	}
	return e.firstErr
}

// viewReadiness derives READ_READY for the ingest API from the document
// view, as `doclog serve` does.
type viewReadiness struct{ view *docview.View }

func (r viewReadiness) ReadReady(ctx context.Context, token oplog.ConsistencyToken) (bool, error) {
	return r.view.Reached(ctx, token)
}

// withPoolSize sets pgxpool's pool_max_conns on a URL that does not set it.
func withPoolSize(raw string, n int) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return raw // a keyword/value string: leave it to the caller
	}
	q := u.Query()
	if q.Get("pool_max_conns") == "" {
		q.Set("pool_max_conns", fmt.Sprint(n))
	}
	u.RawQuery = q.Encode()
	return u.String()
}
