package ingest_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/doclog/doclog/ingest"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/record"
)

// With the executor group stopped (its committed offsets stay where they
// are), submits are accepted until its backlog passes the bound, then
// answered 429 executor_lag with a Retry-After and nothing produced; once
// the group commits past the backlog, submits are accepted again, and every
// job acknowledged is on the topic.
func TestBacklogPastTheBoundIs429(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	ctx := testCtx(t)
	group, commit := stoppedGroup(t, kb)

	w, err := kafka.NewBacklogWatcher(kafka.BacklogConfig{Client: kb.producer, Group: group, Topic: kb.topic, Interval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { require.NoError(t, w.Stop(ctx)) })
	reg := prometheus.NewRegistry()
	const bound = 5
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic, MaxExecutorLagRecords: bound, MaxExecutorLag: -1},
		ingest.Deps{Producer: kb.producer, Backlog: w, Registerer: reg})
	require.Eventually(t, func() bool { return !w.Backlog().MeasuredAt.IsZero() }, 30*time.Second, 50*time.Millisecond)

	submit := func(i int) response {
		return do(t, h, request{method: "POST", path: "/v1/jobs", body: fmt.Sprintf(
			`{"documentId": "doc-%d", "documentType": "doclog/json", "actions": [{"type": "MERGE_PATCH", "scope": "global", "input": {"n": %d}}]}`, i, i)})
	}
	acked := map[string]bool{}
	var refused response
	for i := 0; refused.status == 0; i++ {
		require.Less(t, i, 100, "no submit was refused")
		res := submit(i)
		if res.status == http.StatusTooManyRequests {
			refused = res
			break
		}
		id, _ := accepted(t, res)
		acked[id] = true
	}
	// Each accepted job counts at once, before a measurement sees it, so
	// the refusal comes by the job past the bound.
	require.LessOrEqual(t, len(acked), bound+1)
	require.NotEmpty(t, acked)
	e := requireRefused(t, refused, http.StatusTooManyRequests, ingest.CodeExecutorLag, "", "jobs behind, past the bound of 5 jobs; nothing was produced: retry after 100ms")
	require.Regexp(t, `^the executors are \d+ jobs behind`, e.Error.Message)
	// No drain rate is measured: the excess drains in under the floor at
	// the rate assumed until one is; HTTP's header rounds up to a second.
	require.Equal(t, "1", refused.header.Get("Retry-After"))
	require.Equal(t, "100", refused.header.Get("Retry-After-Ms"))
	require.Equal(t, int64(len(acked)), kb.endOffsets(t), "a refused job is not produced")
	require.Equal(t, 1.0, refusalsBy(t, reg, "records"))
	require.Equal(t, http.StatusOK, do(t, h, request{method: "GET", path: "/readyz"}).status, "backpressure is not unreadiness")
	// Every write route is refused, not only POST /v1/jobs.
	requireRefused(t, do(t, h, request{method: "POST", path: "/v1/documents", body: `{"documentType": "doclog/json"}`}),
		http.StatusTooManyRequests, ingest.CodeExecutorLag, "", "past the bound of 5 jobs")
	requireRefused(t, do(t, h, request{method: "POST", path: "/v1/jobs:batch", body: `{"jobs": [{"documentId": "doc-b", "documentType": "doclog/json", "actions": [{"type": "MERGE_PATCH", "scope": "global", "input": {"n": 1}}]}]}`}),
		http.StatusTooManyRequests, ingest.CodeExecutorLag, "", "past the bound of 5 jobs")

	// The executor catches up: it commits the ends of the partitions.
	commit(true)
	var res response
	require.Eventually(t, func() bool {
		res = submit(1000)
		return res.status == http.StatusAccepted
	}, 30*time.Second, 100*time.Millisecond, "submits are accepted again once the backlog drained")
	id, _ := accepted(t, res)
	acked[id] = true

	for _, r := range kb.readRecords(t, len(acked)) {
		j, err := record.DecodeJob(r)
		require.NoError(t, err)
		require.True(t, acked[j.JobID], "job %s on the topic was not acknowledged", j.JobID)
		delete(acked, j.JobID)
	}
	require.Empty(t, acked, "acknowledged jobs missing from the topic")
}

// Submits arriving at once see each other: each reserves its job before
// the check, so a crowd of clients (say, back from the same Retry-After)
// is admitted up to the bound, not whole.
func TestConcurrentSubmitsStopAtTheBound(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	ctx := testCtx(t)
	group, _ := stoppedGroup(t, kb)
	w, err := kafka.NewBacklogWatcher(kafka.BacklogConfig{Client: kb.producer, Group: group, Topic: kb.topic, Interval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { require.NoError(t, w.Stop(ctx)) })
	const bound = 5
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic, MaxExecutorLagRecords: bound, MaxExecutorLag: -1, ExecutorLagInterval: time.Hour},
		ingest.Deps{Producer: kb.producer, Backlog: w})
	require.Eventually(t, func() bool { return !w.Backlog().MeasuredAt.IsZero() }, 30*time.Second, 50*time.Millisecond)

	const clients = 40
	statuses := make([]int, clients)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range clients {
		wg.Go(func() {
			<-start
			res, _ := serve(h, request{method: "POST", path: "/v1/jobs", body: fmt.Sprintf(
				`{"documentId": "doc-%d", "documentType": "doclog/json", "actions": [{"type": "MERGE_PATCH", "scope": "global", "input": {"n": %d}}]}`, i, i)})
			statuses[i] = res.status
		})
	}
	close(start)
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	// The one measurement (the interval is an hour) saw an empty backlog:
	// only the reservations stop the crowd.
	require.Equal(t, bound, count[http.StatusAccepted], "statuses: %v", count)
	require.Equal(t, clients-bound, count[http.StatusTooManyRequests], "statuses: %v", count)
	require.Equal(t, int64(bound), kb.endOffsets(t), "only the admitted jobs are produced")
	require.Equal(t, int64(bound), w.Backlog().Records, "the produced jobs count, the refused ones' reservations are released")
}

// stoppedGroup is an executor group that consumed nothing and stopped: its
// offsets are committed at the start of every partition of the jobs topic.
// commit(true) commits the partitions' ends, as the group would once it
// caught up.
func stoppedGroup(t *testing.T, kb *kafkaBundle) (group string, commit func(toEnd bool)) {
	t.Helper()
	ctx := testCtx(t)
	group = kb.env.Group("executor")
	adm := kb.env.Admin()
	commit = func(toEnd bool) {
		t.Helper()
		at := map[int32]int64{}
		if toEnd {
			ends, err := adm.ListEndOffsets(ctx, kb.topic)
			require.NoError(t, err)
			require.NoError(t, ends.Error())
			ends.Each(func(o kadm.ListedOffset) { at[o.Partition] = o.Offset })
		}
		offsets := kadm.Offsets{}
		for p := range int32(kb.env.Topics.JobsPartitions) {
			offsets.Add(kadm.Offset{Topic: kb.topic, Partition: p, At: at[p]})
		}
		resp, err := adm.CommitOffsets(ctx, group, offsets)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	commit(false)
	return group, commit
}

// refusalsBy is doclog_ingest_backpressure_refusals_total{bound}.
func refusalsBy(t *testing.T, reg *prometheus.Registry, bound string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "doclog_ingest_backpressure_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == bound {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no refusals counted for bound %s", bound)
	return 0
}

// The time bound: with the group stopped, a job accepted now is refused
// behind once it has waited longer than the bound, and accepted again once
// the group committed past it.
func TestOldJobsWaitingIs429(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	ctx := testCtx(t)
	group, commit := stoppedGroup(t, kb)
	const bound = 300 * time.Millisecond
	w, err := kafka.NewBacklogWatcher(kafka.BacklogConfig{Client: kb.producer, Group: group, Topic: kb.topic, Interval: 50 * time.Millisecond, MaxAge: bound})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { require.NoError(t, w.Stop(ctx)) })
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic, MaxExecutorLag: bound, MaxExecutorLagRecords: -1},
		ingest.Deps{Producer: kb.producer, Backlog: w})
	require.Eventually(t, func() bool { return !w.Backlog().MeasuredAt.IsZero() }, 30*time.Second, 50*time.Millisecond)

	submit := func() response {
		return do(t, h, request{method: "POST", path: "/v1/jobs", body: `{"documentId": "doc-old", "documentType": "doclog/json", "actions": [{"type": "MERGE_PATCH", "scope": "global", "input": {"n": 1}}]}`})
	}
	accepted(t, submit())
	sent := time.Now()
	var res response
	require.Eventually(t, func() bool {
		res = submit()
		return res.status == http.StatusTooManyRequests
	}, 30*time.Second, 50*time.Millisecond, "a job waiting past the bound refuses submits")
	require.GreaterOrEqual(t, time.Since(sent), bound, "refused only once the first job had waited the bound")
	// No drain rate is measured (the group is stopped): the jobs past the
	// bound drain in under the floor at the rate assumed until one is.
	requireRefused(t, res, http.StatusTooManyRequests, ingest.CodeExecutorLag, "", "of them waiting longer than the bound of 300ms; nothing was produced: retry after 100ms")
	require.Equal(t, "1", res.header.Get("Retry-After"))
	require.Equal(t, "100", res.header.Get("Retry-After-Ms"))

	commit(true)
	require.Eventually(t, func() bool { return submit().status == http.StatusAccepted }, 30*time.Second, 50*time.Millisecond,
		"submits are accepted again once the group worked past the old jobs")
}
