package executor_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/record"
)

// The loop commits offsets at most once per OffsetCommitInterval, so the
// jobs of the polls in between are committed later; with no record left to
// wake it, the member still commits them, while it runs, not only at stop.
// Announcing without waiting (AsyncAnnounce), the last acknowledgement is
// what wakes it.
func TestOffsetsCommittedWhileIdle(t *testing.T) {
	t.Parallel()
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async announce %v", async), func(t *testing.T) {
			t.Parallel()
			testOffsetsCommittedWhileIdle(t, async)
		})
	}
}

func testOffsetsCommittedWhileIdle(t *testing.T, async bool) {
	b := setup(t, 2)
	cfg := b.config()
	cfg.OffsetCommitInterval = 2 * time.Second
	cfg.AsyncAnnounce = async
	b.start(cfg)

	first := []*record.Job{createJob(docName(1), jsondoc.DocumentType), createJob(docName(2), jsondoc.DocumentType)}
	b.submit(first...)
	b.waitResults(ids(first), 30*time.Second)
	// Within the interval of the first commit: these wait for the next.
	second := []*record.Job{patchJob(docName(1), 1), patchJob(docName(2), 1), patchJob(docName(1), 2)}
	b.submit(second...)
	b.waitResults(ids(second), 30*time.Second)

	waitCommittedToEnd(t, b.kenv.Admin(), b.kenv.Group("executor"), b.kenv.Names.Jobs, 30*time.Second,
		"every partition committed to its end while the member idles")
}

// waitCommittedToEnd waits until group has committed every partition of
// topic to its end offset.
func waitCommittedToEnd(t *testing.T, adm *kadm.Client, group, topic string, within time.Duration, what string) {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	require.NoError(t, err)
	waitFor(t, within, what, func() bool {
		committed, err := adm.FetchOffsets(context.Background(), group)
		if err != nil {
			return false
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := committed.Lookup(topic, o.Partition); o.Offset > 0 && (!ok || c.At != o.Offset) {
				done = false
			}
		})
		return done
	})
}

// The loop does not wait for its offset commits; a commit the coordinator
// refuses is sent again, so an idle member still commits to the end while it
// runs. franz-go's in-process cluster refuses the first commits.
func TestRefusedCommitIsSentAgainOnKfake(t *testing.T) {
	t.Parallel()
	names := kafka.TopicNames(testenv.UniqueName(t, "t_") + ".")
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, names.All()...))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	var refused atomic.Int32
	cluster.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if refused.Load() >= 3 {
			return nil, nil, false
		}
		refused.Add(1)
		req := kreq.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rqt := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = rqt.Topic, rqt.TopicID
			for _, p := range rqt.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	kcfg := kafka.Config{Seeds: cluster.ListenAddrs()}
	store := postgres.New(migratedPool(t, testenv.PostgresSchema(t)))
	e, err := executor.New(executor.Config{
		Store: store, Registry: registry(t), Kafka: kcfg, Topics: names, Group: "executors",
		FetchMaxWait: 100 * time.Millisecond, RetryBaseDelay: 10 * time.Millisecond,
		OffsetCommitInterval: 50 * time.Millisecond,
		Logger:               zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })

	producer, err := kafka.NewClient(kcfg, nil)
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	all, _ := interleaved(4, 3)
	for _, j := range all {
		r, err := record.NewJobRecord(names.Jobs, j)
		require.NoError(t, err)
		require.NoError(t, producer.ProduceSync(context.Background(), r).FirstErr())
	}
	waitFor(t, 10*time.Second, "every job settled", func() bool {
		res, err := store.JobResults(context.Background(), ids(all))
		return err == nil && len(res) == len(all)
	})

	waitCommittedToEnd(t, kadm.NewClient(producer), "executors", names.Jobs, 10*time.Second,
		"every partition committed to its end while the member runs")
	require.EqualValues(t, 3, refused.Load(), "the coordinator refused the first commits")
}
