package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/doclog/doclog/executor"
	"github.com/doclog/doclog/internal/kafka"
	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/record"
)

// The lifecycle against franz-go's in-process cluster: Ready follows Run,
// a stop finishes the work, commits every offset and leaves the group, and
// closing twice (or running after Close) is harmless.
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
	done := make(chan error, 1)
	go func() { done <- e.Run(context.Background()) }()

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

	e.Close()
	e.Close()
	require.NoError(t, <-done)
	require.ErrorIs(t, e.Ready(), executor.ErrNotRunning)
	require.ErrorContains(t, e.Run(context.Background()), "already started")

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

	// Closing a member that never ran is harmless too.
	idle, err := executor.New(cfg)
	require.NoError(t, err)
	idle.Close()
	idle.Close()
}
