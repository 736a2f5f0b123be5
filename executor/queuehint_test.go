package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/executor"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// A job whose queueHint names a job of another document waits for it, with
// the rest of its document, while other documents of its partition keep
// flowing; the offset commit stops at the waiting job. A failed dependency
// fails the job.
func TestQueueHint(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	dlq := b.reader(b.kenv.Names.DeadLetters)
	b.start(b.config())

	dependency := createJob("doc-c", jsondoc.DocumentType) // submitted later
	createB := createJob("doc-b", jsondoc.DocumentType)
	waits := patchJob("doc-b", 1)
	waits.QueueHint = []string{dependency.JobID}
	behind := patchJob("doc-b", 2)
	failing := patchJob("doc-f", 1) // doc-f was never created
	createE := createJob("doc-e", jsondoc.DocumentType)
	dependsOnFailure := patchJob("doc-e", 1)
	dependsOnFailure.QueueHint = []string{failing.JobID}
	others := []*record.Job{createJob("doc-d", jsondoc.DocumentType), patchJob("doc-d", 1), patchJob("doc-d", 2)}

	recs := b.submit(append([]*record.Job{createB, waits, behind, failing, createE, dependsOnFailure}, others...)...)
	results := b.waitResults(ids(append([]*record.Job{createB, failing, createE, dependsOnFailure}, others...)), 30*time.Second)
	for _, j := range append([]*record.Job{createB, createE}, others...) {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status)
	}
	require.Equal(t, oplog.JobFailed, results[failing.JobID].Status)
	require.Equal(t, model.NameDocumentNotFound, results[failing.JobID].ErrorHistory[0].Name)
	dep := results[dependsOnFailure.JobID]
	require.Equal(t, oplog.JobFailed, dep.Status)
	require.Equal(t, executor.NameDependencyFailed, dep.ErrorHistory[len(dep.ErrorHistory)-1].Name)
	require.Contains(t, dep.ErrorHistory[len(dep.ErrorHistory)-1].Message, failing.JobID)

	// The waiting job and the one behind it have no result, and the group's
	// committed offset stops at the waiting job.
	pending, err := b.store.JobResults(context.Background(), ids([]*record.Job{waits, behind}))
	require.NoError(t, err)
	require.Empty(t, pending)
	adm := b.kenv.Admin()
	waitFor(t, 30*time.Second, "the commit stops at the waiting job", func() bool {
		offs, err := adm.FetchOffsets(context.Background(), b.kenv.Group("executor"))
		if err != nil {
			return false
		}
		o, ok := offs.Lookup(b.kenv.Names.Jobs, 0)
		return ok && o.At == recs[1].Offset
	})

	b.submit(dependency)
	results = b.waitResults(ids([]*record.Job{dependency, waits, behind}), 30*time.Second)
	for _, j := range []*record.Job{dependency, waits, behind} {
		require.Equal(t, oplog.JobWriteReady, results[j.JobID].Status)
	}
	b.checkDocument("doc-b", jsondoc.DocumentType, []string{waits.JobID, behind.JobID})

	letters := map[string]*record.DeadLetter{}
	dlq.until(30*time.Second, "the dependency-failed dead letter", func(recs []*kgo.Record) bool {
		for _, rec := range recs {
			d, err := record.DecodeDeadLetter(rec)
			require.NoError(t, err)
			letters[d.Job.JobID] = d
		}
		return letters[dependsOnFailure.JobID] != nil
	})
	require.Equal(t, record.ErrDependencyFailed, letters[dependsOnFailure.JobID].ErrorType)
	require.Equal(t, record.ErrDocumentNotFound, letters[failing.JobID].ErrorType)
}

// A job whose dependency never completes fails with TIMEOUT once the job
// timeout passes; its document's later jobs then go on.
func TestQueueHintTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	cfg := b.config()
	cfg.JobTimeout = time.Second
	b.start(cfg)

	create := createJob("doc-t", jsondoc.DocumentType)
	waits := patchJob("doc-t", 1)
	waits.QueueHint = []string{uuid.NewString()} // never submitted
	after := patchJob("doc-t", 2)
	start := time.Now()
	b.submit(create, waits, after)

	results := b.waitResults(ids([]*record.Job{create, waits, after}), 30*time.Second)
	require.GreaterOrEqual(t, time.Since(start), time.Second)
	require.Equal(t, oplog.JobWriteReady, results[create.JobID].Status)
	r := results[waits.JobID]
	require.Equal(t, oplog.JobFailed, r.Status)
	require.Equal(t, executor.NameJobTimeout, r.ErrorHistory[len(r.ErrorHistory)-1].Name)
	require.Equal(t, oplog.JobWriteReady, results[after.JobID].Status)
	b.checkDocument("doc-t", jsondoc.DocumentType, []string{after.JobID})
}
