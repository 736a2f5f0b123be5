package client_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/pgproj"
	"github.com/doclog/doclog/readstore"
	"github.com/doclog/doclog/readstore/pgread"
)

// The running stack the examples and the real-stack tests use, set by
// TestMain.
var (
	ingestURL, readstoreURL string
	// newReadstore builds a read store of the stack's own (stack.newReadstore).
	newReadstore func(addr string) (*readstore.Server, error)
	// stackKafka and stackIngestDeps are the stack's Kafka client and what
	// its ingest server talks to, for a test that runs an ingest of its
	// own (stack.kafka, stack.ingestDeps).
	stackKafka      *kgo.Client
	stackIngestDeps ingest.Deps
	// writeToken may call every route, readToken only reads and job
	// status: both servers are configured with one of each.
	writeToken = "client-test-write-token"
	readToken  = "client-test-read-token"
)

// stack is doclog composed in this process from its public packages, as
// examples/embed composes it: the executor, the document view and the
// relationship index runners, the ingest API (reporting READ_READY through
// the read store) and the read store, on a Postgres schema and Kafka topics
// of this test binary's own.
type stack struct {
	ingestURL, readstoreURL string
	// newReadstore builds another read store over the same stores, for a
	// test that stops and restarts one.
	newReadstore func(addr string) (*readstore.Server, error)
	kafka        *kgo.Client
	ingestDeps   ingest.Deps
	stop         func()
}

func startStack(ctx context.Context) (*stack, error) {
	dbURL, seeds := os.Getenv("TEST_DATABASE_URL"), os.Getenv("TEST_KAFKA_SEEDS")
	if dbURL == "" || seeds == "" {
		return nil, errors.New("TEST_DATABASE_URL and TEST_KAFKA_SEEDS are not set: run `make test`, or start the services with scripts/pg.sh and scripts/kafka.sh and export what they print (docs/testing.md)")
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "client_" + hex.EncodeToString(suffix)

	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*stack, error) {
		closeAll()
		return nil, err
	}

	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect to TEST_DATABASE_URL: %w", err)
	}
	closers = append(closers, admin.Close)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return fail(fmt.Errorf("create the test schema: %w", err))
	}
	closers = append(closers, func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE") })
	u, err := url.Parse(dbURL)
	if err != nil {
		return fail(fmt.Errorf("parse TEST_DATABASE_URL: %w", err))
	}
	q := u.Query()
	q.Set("options", "-csearch_path="+name)
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return fail(fmt.Errorf("open the test schema: %w", err))
	}
	closers = append(closers, pool.Close)
	if _, err := pgmigrate.Migrate(ctx, pool, postgres.Migrations(), pgproj.RunnerMigrations(), docview.Migrations(), indexer.Migrations()); err != nil {
		return fail(fmt.Errorf("migrate: %w", err))
	}

	prefix := name + "."
	kcfg := kafka.Config{Seeds: []string{seeds}}
	topicsCfg := kafka.TopicsConfig{Prefix: prefix, JobsPartitions: 2}
	topics := topicsCfg.Names()
	cl, err := kafka.NewClient(kcfg, nil, append(ingest.ProducerOptions(), kgo.DefaultProduceTopic(topics.Jobs))...)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, cl.Close)
	// Run after every consumer stopped, before the client closes, as the
	// repository's tests do: a run leaves no topics behind.
	closers = append(closers, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(dctx, topics.All()...)
	})
	if _, err := kafka.EnsureTopics(ctx, cl, topicsCfg); err != nil {
		return fail(fmt.Errorf("ensure the topics: %w", err))
	}
	reg, err := builtin.NewRegistry()
	if err != nil {
		return fail(err)
	}
	store := postgres.New(pool)
	views := pgread.New(pool)

	ex, err := executor.New(executor.Config{Store: store, Registry: reg, Kafka: kcfg, Topics: topics,
		Group: prefix + executor.DefaultGroup})
	if err != nil {
		return fail(err)
	}
	consumers := []interface {
		Start(context.Context) error
		Stop(context.Context) error
	}{ex}
	for _, p := range []projectors.Projector{docview.Projector{}, indexer.Projector{}} {
		r, err := projectors.New(projectors.Config{Projector: p, Store: pgproj.New(pool), Log: store, Registry: reg,
			Kafka: kcfg, Topic: topics.WriteReady, Group: prefix + projectors.DefaultGroupPrefix + p.Name()})
		if err != nil {
			return fail(err)
		}
		consumers = append(consumers, r)
	}
	// Each consumer bounds its own stop, and the pool they write through
	// must outlive them, so they stop before the closers run.
	stopConsumers := func() {
		for _, c := range consumers {
			_ = c.Stop(context.Background())
		}
	}
	closers = append(closers, stopConsumers)
	for _, c := range consumers {
		if err := c.Start(ctx); err != nil {
			return fail(err)
		}
	}

	tokens := []string{writeToken}
	reads := []string{readToken}
	ingestDeps := ingest.Deps{Producer: cl, Results: store, Registry: reg, ReadReady: readstore.ReadReadiness{Store: views}}
	in, err := ingest.NewServer(ingest.Config{Addr: "127.0.0.1:0", JobsTopic: topics.Jobs, BearerTokens: tokens, ReadTokens: reads}, ingestDeps)
	if err != nil {
		return fail(err)
	}
	newReadstore := func(addr string) (*readstore.Server, error) {
		return readstore.NewServer(readstore.Config{Addr: addr, BearerTokens: tokens, ReadTokens: reads},
			readstore.Deps{Store: views, Log: store, Registry: reg})
	}
	rs, err := newReadstore("127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	for _, s := range []interface {
		Start(context.Context) error
		Stop(context.Context) error
	}{in, rs} {
		if err := s.Start(ctx); err != nil {
			return fail(err)
		}
		closers = append(closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Stop(sctx)
		})
	}
	return &stack{
		ingestURL:    "http://" + in.Addr().String(),
		readstoreURL: "http://" + rs.Addr().String(),
		newReadstore: newReadstore,
		kafka:        cl,
		ingestDeps:   ingestDeps,
		stop:         closeAll,
	}, nil
}
