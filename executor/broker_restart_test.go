package executor_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/internal/testenv"
)

// The broker restarts while the member holds a batch it appended but has
// not announced: the announcement fails, the member reports the outage and
// retries without limit, and once the broker is back every job ends
// WRITE_READY exactly once, is announced, and nothing is dead-lettered or
// failed because of the restart. The broker is the test's own (started by
// scripts/kafka.sh), so stopping it disturbs no other test.
func TestBrokerRestart(t *testing.T) {
	t.Parallel()
	broker := testenv.StartKafkaNode(t)
	b := setupOn(t, testenv.PostgresSchema(t), testenv.KafkaAt(t, broker.Seeds), 4)

	var (
		once     sync.Once
		appended = make(chan struct{})
		resume   = make(chan struct{})
	)
	cfg := b.config()
	cfg.ProduceTimeout = 2 * time.Second
	cfg.SetAfterAppend(func() error {
		once.Do(func() {
			close(appended)
			<-resume
		})
		return nil
	})
	m := b.start(cfg)
	wr := b.reader(b.kenv.Names.WriteReady)

	const docs, perDoc = 10, 10
	all, perDocJobs := interleaved(docs, perDoc)
	half := len(all) / 2
	b.submit(all[:half]...)
	select {
	case <-appended:
	case <-time.After(60 * time.Second):
		t.Fatal("the member appended nothing")
	}
	broker.Stop()
	close(resume) // the batch's announcement now meets a stopped broker
	waitFor(t, 30*time.Second, "the member reports the outage", func() bool {
		var ue *executor.UnavailableError
		return errors.As(m.e.Ready(), &ue)
	})
	broker.Start()

	b.submit(all[half:]...)
	b.requireAllApplied(all, perDocJobs, docs, 90*time.Second)
	announced := b.writeReadies(wr, ids(all), 60*time.Second)
	for _, j := range all {
		require.NotEmpty(t, announced[j.JobID], "job %s was never announced", j.JobID)
	}
	waitFor(t, 30*time.Second, "the member is ready again", func() bool { return m.e.Ready() == nil })
	b.requireNoDeadLetters()
}
