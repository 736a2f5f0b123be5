package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/jsondoc"
)

// With NoRetries (--executor-max-retries=0) a job that sets no maxRetries of
// its own fails RETRIES_EXHAUSTED at its first transient error, after
// exactly one attempt; a job's own maxRetries still wins over it.
func TestNoRetriesFailsAfterOneAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	store := &countingStore{failingStore: failingStore{Store: b.store, failures: map[string]int{"doc-once": 1000, "doc-own": 1}}, attempts: map[string]int{}}
	cfg := b.config()
	cfg.Store, cfg.NoRetries = store, true
	b.start(cfg)

	once := createJob("doc-once", jsondoc.DocumentType)
	b.submit(once)
	r := b.waitResults([]string{once.JobID}, 30*time.Second)[once.JobID]
	require.Equal(t, oplog.JobFailed, r.Status)
	last := r.ErrorHistory[len(r.ErrorHistory)-1]
	require.Equal(t, executor.NameRetriesExhausted, last.Name)
	require.Contains(t, last.Message, "gave up after 1 attempts")
	require.Len(t, r.ErrorHistory, 2, "one transient error, then the verdict")
	require.Equal(t, 1, store.attemptsOf("doc-once"), "one append that wrote the job's operations, no retry")

	// Submitted once the first has settled, so no batch holds both.
	two := 2
	own := createJob("doc-own", jsondoc.DocumentType)
	own.MaxRetries = &two
	b.submit(own)
	r = b.waitResults([]string{own.JobID}, 30*time.Second)[own.JobID]
	require.Equal(t, oplog.JobWriteReady, r.Status, "the job's own maxRetries lets it retry")
	require.Equal(t, 2, store.attemptsOf("doc-own"))
}

// countingStore is a failingStore that counts the appends writing each
// document's operations, failed or not.
type countingStore struct {
	failingStore
	mu       sync.Mutex
	attempts map[string]int
}

func (s *countingStore) Append(ctx context.Context, reqs []oplog.AppendRequest) ([]oplog.AppendResult, error) {
	s.mu.Lock()
	for _, req := range reqs {
		for _, sa := range req.Streams {
			if len(sa.Operations) > 0 {
				s.attempts[req.DocumentID]++
				break
			}
		}
	}
	s.mu.Unlock()
	return s.failingStore.Append(ctx, reqs)
}

func (s *countingStore) attemptsOf(doc string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[doc]
}

// A Config without NoRetries takes the default for a zero MaxRetries, as a
// Config literal always has; NoRetries makes it 0, and contradicts any
// other MaxRetries.
func TestConfigNoRetries(t *testing.T) {
	t.Parallel()
	require.Equal(t, executor.DefaultMaxRetries, executor.Config{}.WithDefaults().MaxRetries)
	require.Equal(t, 3, executor.Config{MaxRetries: 3}.WithDefaults().MaxRetries)
	c := executor.Config{NoRetries: true}.WithDefaults()
	require.Zero(t, c.MaxRetries)
	require.True(t, c.NoRetries)
	require.Zero(t, c.WithDefaults().MaxRetries, "WithDefaults twice keeps it")

	reg := registry(t)
	valid := executor.Config{Store: &failingStore{}, Registry: reg, Kafka: kafka.Config{Seeds: []string{"localhost:9092"}}, NoRetries: true}.WithDefaults()
	require.NoError(t, valid.Validate())
	valid.MaxRetries = 3
	require.ErrorContains(t, valid.Validate(), "NoRetries contradicts max retries 3")
}
