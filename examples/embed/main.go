// Command embed runs doclog's write path and read side inside a program of
// its own module, composed from doclog's public packages only: the
// executor, a projector runner for the document view and one for a
// projector this module defines (Counter), the submit API and the read API.
// It is the smallest composition of the stages; `doclog serve` (package
// app) is the full one, with health, metrics, start-up waits and roles.
//
//	go run . -database-url postgres://... -kafka-seeds 127.0.0.1:9092
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/pgproj"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/readstore/pgread"
)

// Options say where the services are and where the APIs listen.
type Options struct {
	DatabaseURL   string
	KafkaSeeds    []string
	TopicPrefix   string
	IngestAddr    string
	ReadstoreAddr string
}

// Stack is the running composition.
type Stack struct {
	Ingest    *ingest.Server
	Readstore *readstore.Server
	stop      func()
}

// Stop stops the servers, then the consumers, and closes the clients.
func (s *Stack) Stop() { s.stop() }

// Start migrates the schema (doclog's sets and the counter's), ensures the
// topics, and starts every part. It returns once the APIs listen.
func Start(ctx context.Context, o Options) (*Stack, error) {
	pool, err := pgxpool.New(ctx, o.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("open the database: %w", err)
	}
	var closers []func()
	fail := func(err error) (*Stack, error) {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		pool.Close()
		return nil, err
	}
	if _, err := pgmigrate.Migrate(ctx, pool, postgres.Migrations(), pgproj.RunnerMigrations(), docview.Migrations(), CounterMigrations()); err != nil {
		return fail(fmt.Errorf("migrate: %w", err))
	}
	kcfg := kafka.Config{Seeds: o.KafkaSeeds}
	topicsCfg := kafka.TopicsConfig{Prefix: o.TopicPrefix, JobsPartitions: 4}
	topics := topicsCfg.Names()
	cl, err := kafka.NewClient(kcfg, nil, kgo.DefaultProduceTopic(topics.Jobs))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, cl.Close)
	if _, err := kafka.EnsureTopics(ctx, cl, topicsCfg); err != nil {
		return fail(fmt.Errorf("ensure the topics: %w", err))
	}
	reg, err := builtin.NewRegistry()
	if err != nil {
		return fail(err)
	}
	store := postgres.New(pool)

	ex, err := executor.New(executor.Config{Store: store, Registry: reg, Kafka: kcfg, Topics: topics,
		Group: o.TopicPrefix + executor.DefaultGroup})
	if err != nil {
		return fail(err)
	}
	runners := []*projectors.Runner{}
	for _, p := range []projectors.Projector{docview.Projector{}, Counter{}} {
		r, err := projectors.New(projectors.Config{Projector: p, Store: pgproj.New(pool), Log: store, Registry: reg,
			Kafka: kcfg, Topic: topics.WriteReady, Group: o.TopicPrefix + projectors.DefaultGroupPrefix + p.Name()})
		if err != nil {
			return fail(err)
		}
		runners = append(runners, r)
	}

	in, err := ingest.NewServer(ingest.Config{Addr: o.IngestAddr, JobsTopic: topics.Jobs},
		ingest.Deps{Producer: cl, Results: store, Registry: reg})
	if err != nil {
		return fail(err)
	}
	rs, err := readstore.NewServer(readstore.Config{Addr: o.ReadstoreAddr},
		readstore.Deps{Store: pgread.New(pool), Log: store, Registry: reg})
	if err != nil {
		return fail(err)
	}

	// Stopped without a bound: each bounds its own stop, and the pool they
	// write through must outlive them.
	stopConsumers := func() {
		_ = ex.Stop(context.Background())
		for _, r := range runners {
			_ = r.Stop(context.Background())
		}
	}
	if err := ex.Start(ctx); err != nil {
		stopConsumers()
		return fail(err)
	}
	for _, r := range runners {
		if err := r.Start(ctx); err != nil {
			stopConsumers()
			return fail(err)
		}
	}
	if err := in.Start(ctx); err != nil {
		stopConsumers()
		return fail(err)
	}
	if err := rs.Start(ctx); err != nil {
		_ = in.Stop(context.Background())
		stopConsumers()
		return fail(err)
	}
	return &Stack{Ingest: in, Readstore: rs, stop: func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = in.Stop(sctx)
		_ = rs.Stop(sctx)
		stopConsumers()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		pool.Close()
	}}, nil
}

func main() {
	var o Options
	var seeds string
	flag.StringVar(&o.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"), "Postgres URL")
	flag.StringVar(&seeds, "kafka-seeds", "127.0.0.1:9092", "Kafka bootstrap broker")
	flag.StringVar(&o.IngestAddr, "ingest-addr", "127.0.0.1:8080", "the submit API's address")
	flag.StringVar(&o.ReadstoreAddr, "readstore-addr", "127.0.0.1:8081", "the read API's address")
	flag.Parse()
	o.KafkaSeeds = []string{seeds}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := Start(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
	fmt.Printf("submit API on %s, read API on %s\n", s.Ingest.Addr(), s.Readstore.Addr())
	<-ctx.Done()
	s.Stop()
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		os.Exit(1)
	}
}
