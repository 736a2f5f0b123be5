package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/kafka"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/record"
)

// The lifecycle against franz-go's in-process cluster: Ready follows Start
// and Stop, a stop finishes the work, commits every offset and leaves the
// group, stopping twice is harmless and starting again is refused.
func TestLifecycleOnKfake(t *testing.T) {
	t.Parallel()
	names := kafka.TopicNames(testenv.UniqueName(t, "t_") + ".")
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, names.All()...))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	kcfg := kafka.Config{Seeds: cluster.ListenAddrs()}
	store := postgres.New(migratedPool(t, testenv.PostgresSchema(t)))

	cfg := executor.Config{
		Store:          store,
		Registry:       registry(t),
		Kafka:          kcfg,
		Topics:         names,
		Group:          "executors",
		FetchMaxWait:   100 * time.Millisecond,
		RetryBaseDelay: 10 * time.Millisecond,
		Logger:         zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	}
	e, err := executor.New(cfg)
	require.NoError(t, err)
	require.ErrorIs(t, e.Ready(), executor.ErrNotRunning)
	require.NoError(t, e.Start(context.Background()))

	producer, err := kafka.NewClient(kcfg, nil)
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	all, _ := interleaved(6, 5)
	var recs []*kgo.Record
	for _, j := range all {
		r, err := record.NewJobRecord(names.Jobs, j)
		require.NoError(t, err)
		recs = append(recs, r)
	}
	require.NoError(t, producer.ProduceSync(context.Background(), recs...).FirstErr())
	waitFor(t, 10*time.Second, "every job settled", func() bool {
		res, err := store.JobResults(context.Background(), ids(all))
		return err == nil && len(res) == len(all)
	})
	require.NoError(t, e.Ready())

	require.NoError(t, e.Stop(context.Background()))
	require.NoError(t, e.Stop(context.Background()))
	<-e.Done()
	require.NoError(t, e.Err())
	require.ErrorIs(t, e.Ready(), executor.ErrNotRunning)
	require.ErrorContains(t, e.Start(context.Background()), "already stopped")

	adm := kadm.NewClient(producer)
	ends, err := adm.ListEndOffsets(context.Background(), names.Jobs)
	require.NoError(t, err)
	committed, err := adm.FetchOffsets(context.Background(), "executors")
	require.NoError(t, err)
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(names.Jobs, o.Partition)
		if o.Offset > 0 {
			require.True(t, ok, "partition %d has a commit", o.Partition)
			require.Equal(t, o.Offset, c.At, "partition %d is committed to its end", o.Partition)
		}
	})
	described, err := adm.DescribeGroups(context.Background(), "executors")
	require.NoError(t, err)
	require.Empty(t, described["executors"].Members, "the member left the group")

	// Stopping a member that never started is harmless too.
	idle, err := executor.New(cfg)
	require.NoError(t, err)
	require.NoError(t, idle.Stop(context.Background()))
	require.NoError(t, idle.Stop(context.Background()))
	require.ErrorContains(t, idle.Start(context.Background()), "already stopped")
}

// Kafka refuses every produce for a while (franz-go's in-process cluster
// answers REQUEST_TIMED_OUT, as a broker that cannot reach its replicas
// does): the member reports not ready and retries without limit; once the
// broker takes records again every committed job is announced, and nothing
// was failed or dead-lettered; announcing with or without waiting.
func TestProduceOutageOnKfake(t *testing.T) {
	t.Parallel()
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async announce %v", async), func(t *testing.T) {
			t.Parallel()
			testProduceOutage(t, async)
		})
	}
}

func testProduceOutage(t *testing.T, async bool) {
	names := kafka.TopicNames(testenv.UniqueName(t, "t_") + ".")
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, names.All()...))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	kcfg := kafka.Config{Seeds: cluster.ListenAddrs()}
	store := postgres.New(migratedPool(t, testenv.PostgresSchema(t)))
	producer, err := kafka.NewClient(kcfg, nil)
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	all, _ := interleaved(4, 5)
	for _, j := range all {
		r, err := record.NewJobRecord(names.Jobs, j)
		require.NoError(t, err)
		require.NoError(t, producer.ProduceSync(context.Background(), r).FirstErr())
	}

	// From now on, every produce (the member's announcements) is refused.
	var refusing atomic.Bool
	refusing.Store(true)
	cluster.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if !refusing.Load() {
			return nil, nil, false
		}
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rqt := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = rqt.Topic, rqt.TopicID
			for _, p := range rqt.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.RequestTimedOut.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	e, err := executor.New(executor.Config{
		Store: store, Registry: registry(t), Kafka: kcfg, Topics: names, Group: "executors",
		FetchMaxWait: 100 * time.Millisecond, RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 200 * time.Millisecond,
		ProduceTimeout: 3 * time.Second, AsyncAnnounce: async,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		require.NoError(t, e.Stop(context.Background()))
		require.NoError(t, e.Err())
	})
	waitFor(t, 10*time.Second, "the member reports Kafka unavailable", func() bool {
		var ue *executor.UnavailableError
		return errors.As(e.Ready(), &ue)
	})
	res, err := store.JobResults(context.Background(), ids(all))
	require.NoError(t, err)
	require.NotEmpty(t, res, "jobs were appended before the produce failed")

	refusing.Store(false)
	consumer, err := kafka.NewClient(kcfg, nil, kgo.ConsumeTopics(names.WriteReady, names.DeadLetters),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(consumer.Close)
	announced := map[string]bool{}
	waitFor(t, 20*time.Second, "every job announced", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		for _, rec := range consumer.PollFetches(ctx).Records() {
			require.Equal(t, names.WriteReady, rec.Topic, "nothing is dead-lettered")
			w, err := record.DecodeWriteReady(rec)
			require.NoError(t, err)
			announced[w.JobID] = true
		}
		return len(announced) == len(all)
	})
	waitFor(t, 10*time.Second, "the member is ready again", func() bool { return e.Ready() == nil })
	res, err = store.JobResults(context.Background(), ids(all))
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, oplog.JobWriteReady, r.Status)
	}
}
