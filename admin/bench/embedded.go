package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/gcpercent"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/projectors/catalog"
)

// embeddedPoolSize is the roles' Postgres pool, doclog's default
// (--database-max-conns).
const embeddedPoolSize = 20

// embedded is doclog's write path run in this process by the same
// composition as `doclog serve` (package app): ingest, the executor and the
// docview and indexer projectors. Analytics (ClickHouse) is left out: the
// pipeline's targets (docs/benchmarks.md) are stated to READ_READY, which is
// the document view's, and ClickHouse would only share the two cores.
type embedded struct {
	app    *app.App
	names  kafka.Topics
	kcfg   kafka.Config
	logger *zap.Logger
	cancel context.CancelFunc
	done   chan error // Run's result
	first  error      // the first failure seen, kept for every later phase
}

// startEmbedded starts the roles against cfg.DatabaseURL (the run's own
// schema, see newRunner), with migrations applied and topics under a fresh
// prefix named after id (so a run never consumes an earlier run's backlog).
func startEmbedded(ctx context.Context, cfg Config, id string) (*embedded, error) {
	prefix := cfg.TopicPrefix + "bench-" + id + "."
	s := &app.Settings{
		Roles:            []string{app.RoleIngest, app.RoleExecutor, app.RoleProjectors},
		Projectors:       catalog.Defaults(),
		IngestAddr:       "127.0.0.1:0",
		OpsAddr:          "127.0.0.1:0",
		DatabaseURL:      cfg.DatabaseURL,
		DatabaseMaxConns: embeddedPoolSize,
		Migrate:          "auto",
		Kafka:            cfg.Kafka,
		Topics:           kafka.TopicsConfig{Prefix: prefix, JobsPartitions: cfg.Partitions},
		CreateTopics:     true,
	}
	if cfg.NoBackpressure {
		s.Tuning.Ingest.MaxExecutorLag, s.Tuning.Ingest.MaxExecutorLagRecords = -1, -1
	}
	s.Tuning.Executor.AsyncAnnounce = cfg.AsyncAnnounce
	if err := s.Validate(); err != nil {
		return nil, err
	}
	// The roles run with the collector target doclog serve gives them.
	gcpercent.Apply(s.GCPercent, false)
	a, err := app.New(ctx, s, cfg.Logger)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &embedded{app: a, names: kafka.TopicNames(prefix), kcfg: cfg.Kafka, logger: cfg.Logger, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() { e.done <- a.Run(runCtx, func() { close(ready) }) }()
	select {
	case <-ready:
		return e, nil
	case err := <-e.done:
		cancel()
		return nil, fmt.Errorf("starting the embedded roles: %w", err)
	case <-ctx.Done():
		e.stop()
		return nil, ctx.Err()
	}
}

func (e *embedded) ingestURL() string { return "http://" + e.app.Addr(app.RoleIngest) }

// stop stops the roles and deletes the run's topics. Stopping twice is
// harmless.
func (e *embedded) stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	e.cancel = nil
	if err := <-e.done; err != nil && e.first == nil {
		e.first = err
	}
	cl, err := kafka.NewClient(e.kcfg, nil)
	if err != nil {
		e.logger.Warn("deleting the benchmark's topics failed", zap.Error(err))
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).DeleteTopics(ctx, e.names.All()...); err != nil {
		e.logger.Warn("deleting the benchmark's topics failed", zap.Error(err))
	}
}

// err returns the first role failure, if a role has ended; it keeps
// returning it, so every phase of the run sees it.
func (e *embedded) err() error {
	if e.first != nil {
		return e.first
	}
	select {
	case err := <-e.done:
		if err == nil {
			err = errors.New("the embedded roles stopped on their own")
		}
		e.first = err
		e.done <- err // stop waits on it
	default:
	}
	return e.first
}
