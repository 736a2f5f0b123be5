package testenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/kafka"
)

// EnvKafkaSeeds names the variable holding the test broker's host:port list,
// comma-separated.
const EnvKafkaSeeds = "TEST_KAFKA_SEEDS"

// KafkaSeeds returns the test brokers, failing the test when they are not
// set.
func KafkaSeeds(t testing.TB) []string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(EnvKafkaSeeds))
	if v == "" {
		t.Fatalf("%s is not set: run `make test`, or start a broker with `scripts/kafka.sh install && scripts/kafka.sh start DIR` and export %s=host:port as it prints",
			EnvKafkaSeeds, EnvKafkaSeeds)
	}
	return strings.Split(v, ",")
}

// KafkaEnv is one test's isolated corner of the test cluster: topic names
// under a prefix of its own and a client config for the brokers.
type KafkaEnv struct {
	// Config reaches the test brokers.
	Config kafka.Config
	// Topics is the test's TopicsConfig: its own prefix and a small
	// partition count, replication 1.
	Topics kafka.TopicsConfig
	// Names are the doclog topic names under the test's prefix.
	Names kafka.Topics
	t     testing.TB
	mu    sync.Mutex
	extra []string
}

// Kafka isolates the test on the real test broker: every topic the test
// creates under Names (or named by Topic) is deleted when the test ends. The
// topics are not created; call kafka.EnsureTopics with Topics, or
// CreateTopics.
func Kafka(t testing.TB) *KafkaEnv {
	t.Helper()
	return KafkaAt(t, KafkaSeeds(t))
}

// KafkaAt is Kafka on other brokers: a test's own, say, which it may stop
// and start.
func KafkaAt(t testing.TB, seeds []string) *KafkaEnv {
	t.Helper()
	return kafkaWith(t, kafka.Config{Seeds: seeds, ClientID: "doclog-test"})
}

// kafkaWith is KafkaAt for brokers reached with cfg, which cleanup uses too.
func kafkaWith(t testing.TB, cfg kafka.Config) *KafkaEnv {
	t.Helper()
	prefix := UniqueName(t, "t_") + "."
	env := &KafkaEnv{
		Config: cfg,
		Topics: kafka.TopicsConfig{Prefix: prefix, JobsPartitions: 4},
		Names:  kafka.TopicNames(prefix),
		t:      t,
	}
	t.Cleanup(func() { deleteTopics(t, cfg, prefix, env.known()) })
	return env
}

// Topic returns a topic name under the test's prefix, deleted at cleanup.
func (e *KafkaEnv) Topic(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.extra = append(e.extra, e.Topics.Prefix+name)
	return e.Topics.Prefix + name
}

func (e *KafkaEnv) known() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append(e.Names.All(), e.extra...)
}

// Group returns a consumer group id unique to the test.
func (e *KafkaEnv) Group(name string) string { return e.Topics.Prefix + name }

// Client returns a client for the test brokers with extra options, closed at
// cleanup.
//
// Its metadata may be refreshed every 100ms rather than franz-go's 5s: a test
// creates topics and uses them at once, and a KRaft broker learns of a new
// topic a moment after its creation, so a client waiting 5s between looks
// would spend most of every test waiting.
func (e *KafkaEnv) Client(extra ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	cl, err := kafka.NewClient(e.Config, nil, append([]kgo.Opt{kgo.MetadataMinAge(100 * time.Millisecond)}, extra...)...)
	if err != nil {
		e.t.Fatalf("create kafka client: %v", err)
	}
	e.t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client for the test brokers, closed at cleanup.
func (e *KafkaEnv) Admin() *kadm.Client {
	e.t.Helper()
	return kadm.NewClient(e.Client())
}

// CreateTopics creates doclog's topics under the test's prefix, with the
// test's TopicsConfig.
func (e *KafkaEnv) CreateTopics() kafka.Topics {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kafka.EnsureTopics(ctx, e.Client(), e.Topics); err != nil {
		e.t.Fatalf("create test topics: %v", err)
	}
	return e.Names
}

// deleteTopics deletes the test's topics: those it named and any other under
// its prefix. Named ones are deleted even when a listing misses them, since a
// KRaft broker learns of a topic a moment after it was created.
func deleteTopics(t testing.TB, cfg kafka.Config, prefix string, named []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kafka.NewClient(cfg, nil)
	if err != nil {
		t.Errorf("delete test topics: create client: %v", err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Errorf("delete test topics: list topics: %v", err)
		return
	}
	mine := slices.Clone(named)
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, prefix) && !slices.Contains(mine, name) {
			mine = append(mine, name)
		}
	}
	resp, err := adm.DeleteTopics(ctx, mine...)
	if err != nil {
		t.Errorf("delete test topics %v: %v", mine, err)
		return
	}
	for _, r := range resp {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("delete test topic %s: %v", r.Topic, r.Err)
		}
	}
}

// KafkaLibs returns the directory of the Kafka jars that
// `scripts/kafka.sh install` fetched, for tests that run Kafka's own tools
// (a plain producer that is not doclog's code). It fails the test when they
// are missing.
func KafkaLibs(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("find the repository root: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("find the repository root: no go.mod above the test's directory")
		}
		dir = parent
	}
	libs := filepath.Join(dir, ".cache", "kafka", "libs")
	matches, _ := filepath.Glob(filepath.Join(libs, "kafka-tools-*.jar"))
	if len(matches) == 0 {
		t.Fatalf("the Kafka jars are not in %s: run `make test` or `scripts/kafka.sh install`", libs)
	}
	return libs
}
