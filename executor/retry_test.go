package executor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/executor"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// A transient error that is not unavailability (a statement the database
// refused) backs off and counts against the job's maxRetries: a job that gets
// through within its retries completes, one that does not ends FAILED with
// RETRIES_EXHAUSTED and a dead letter, and the partition goes on.
func TestTransientErrorsCountAgainstRetries(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	dlq := b.reader(b.kenv.Names.DeadLetters)
	store := &failingStore{Store: b.store, failures: map[string]int{"doc-recovers": 2, "doc-gives-up": 1000}}
	cfg := b.config()
	cfg.Store = store
	b.start(cfg)

	three, one := 3, 1
	recovers := createJob("doc-recovers", jsondoc.DocumentType)
	recovers.MaxRetries = &three
	givesUp := createJob("doc-gives-up", jsondoc.DocumentType)
	givesUp.MaxRetries = &one
	after := createJob("doc-after", jsondoc.DocumentType)
	b.submit(recovers, givesUp, after)

	results := b.waitResults(ids([]*record.Job{recovers, givesUp, after}), 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, results[recovers.JobID].Status)
	require.Equal(t, oplog.JobWriteReady, results[after.JobID].Status)
	r := results[givesUp.JobID]
	require.Equal(t, oplog.JobFailed, r.Status)
	last := r.ErrorHistory[len(r.ErrorHistory)-1]
	require.Equal(t, executor.NameRetriesExhausted, last.Name)
	require.Contains(t, last.Message, "gave up after 2 attempts")
	require.Len(t, r.ErrorHistory, 3, "two transient errors, then the verdict")

	var letter *record.DeadLetter
	dlq.until(30*time.Second, "the retries-exhausted dead letter", func(recs []*kgo.Record) bool {
		for _, rec := range recs {
			d, err := record.DecodeDeadLetter(rec)
			require.NoError(t, err)
			if d.Job != nil && d.Job.JobID == givesUp.JobID {
				letter = d
			}
		}
		return letter != nil
	})
	require.Equal(t, record.ErrRetriesExhausted, letter.ErrorType)
	require.Equal(t, 3, letter.Attempts)
}

// failingStore refuses the appends that write operations of some documents,
// a given number of times each, with an error that is not unavailability.
type failingStore struct {
	oplog.Store
	mu       sync.Mutex
	failures map[string]int
}

func (s *failingStore) Append(ctx context.Context, reqs []oplog.AppendRequest) ([]oplog.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, req := range reqs {
		writes := false
		for _, sa := range req.Streams {
			writes = writes || len(sa.Operations) > 0
		}
		if writes && s.failures[req.DocumentID] > 0 {
			s.failures[req.DocumentID]--
			return nil, errors.New("ERROR: could not serialize access (SQLSTATE 40001)")
		}
	}
	return s.Store.Append(ctx, reqs)
}
