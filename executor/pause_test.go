package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/model/ledger"
	"github.com/doclog/doclog/record"
)

// A pause of a partition or of a document type, set while a member runs,
// holds the jobs it covers unapplied while the rest flows, and across a
// member restart; resumed, each is applied once, in order.
func TestPauses(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := context.Background()
	store := b.store.(*postgres.Store)
	m1 := b.start(b.config())

	// Documents on both partitions, created while nothing is paused.
	var creates []*record.Job
	for i := range 8 {
		creates = append(creates, createJob(docName(i), jsondoc.DocumentType))
	}
	recs := b.submit(creates...)
	b.waitResults(ids(creates), 30*time.Second)
	onPart := map[int32][]string{}
	for i, r := range recs {
		onPart[r.Partition] = append(onPart[r.Partition], creates[i].DocumentID)
	}
	require.Len(t, onPart, 2, "eight documents land on both partitions")
	const paused, flowing = int32(0), int32(1)

	for _, target := range []string{executor.PartitionTarget(paused), executor.TypeTarget(ledger.DocumentType)} {
		added, err := store.PauseExecutorIfAbsent(ctx, target, "test")
		require.NoError(t, err)
		require.True(t, added)
	}
	time.Sleep(3 * time.Second) // the running member reads the pauses within pausePoll

	held := patchJob(onPart[paused][0], 1)
	heldBehind := patchJob(onPart[paused][0], 2)
	ledgerJob := createJob("ledger-paused", ledger.DocumentType)
	free := patchJob(onPart[flowing][0], 1)
	b.submit(held, heldBehind, ledgerJob, free)
	b.waitResults([]string{free.JobID}, 30*time.Second)
	requireNoResult := func(jobs ...*record.Job) {
		t.Helper()
		got, err := b.store.JobResults(ctx, ids(jobs))
		require.NoError(t, err)
		require.Empty(t, got)
	}
	time.Sleep(500 * time.Millisecond)
	requireNoResult(held, heldBehind, ledgerJob)

	// A new member obeys the pauses from its first batch.
	m1.stop()
	b.start(b.config())
	free2 := patchJob(onPart[flowing][0], 2)
	b.submit(free2)
	b.waitResults([]string{free2.JobID}, 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	requireNoResult(held, heldBehind, ledgerJob)

	// Resumed, the partition's jobs run in order, once each.
	lifted, err := store.ResumeExecutor(ctx, executor.PartitionTarget(paused))
	require.NoError(t, err)
	require.True(t, lifted)
	res := b.waitResults(ids([]*record.Job{held, heldBehind}), 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, res[held.JobID].Status)
	require.Equal(t, oplog.JobWriteReady, res[heldBehind.JobID].Status)
	b.checkDocument(onPart[paused][0], jsondoc.DocumentType, ids([]*record.Job{held, heldBehind}))
	requireNoResult(ledgerJob) // its type is still paused, whatever its partition

	lifted, err = store.ResumeExecutor(ctx, executor.TypeTarget(ledger.DocumentType))
	require.NoError(t, err)
	require.True(t, lifted)
	res = b.waitResults([]string{ledgerJob.JobID}, 30*time.Second)
	require.Equal(t, oplog.JobWriteReady, res[ledgerJob.JobID].Status)
	ops := b.readAll(oplog.StreamKey{DocumentID: ledgerJob.DocumentID, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch})
	require.Len(t, ops, 1)
	require.Equal(t, ledgerJob.JobID, ops[0].JobID)
	pauses, err := store.ExecutorPauses(ctx)
	require.NoError(t, err)
	require.Empty(t, pauses)
}
