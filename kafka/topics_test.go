package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/kafka"
)

func TestTopicsConfigDefaults(t *testing.T) {
	t.Parallel()
	c := kafka.TopicsConfig{}.WithDefaults()
	require.NoError(t, c.Validate())
	require.Equal(t, int32(12), c.JobsPartitions)
	require.Equal(t, int32(12), c.WriteReadyPartitions, "write-ready follows the jobs partition count")
	require.Equal(t, int32(1), c.DeadLetterPartitions)
	require.Equal(t, 2, c.MinInsyncReplicas)
	require.Equal(t, kafka.Topics{Jobs: "doclog.jobs", WriteReady: "doclog.write-ready", DeadLetters: "doclog.dead-letters"}, c.Names())

	c = kafka.TopicsConfig{Prefix: "t1.", JobsPartitions: 6}.WithDefaults()
	require.Equal(t, int32(6), c.WriteReadyPartitions)
	require.Equal(t, []string{"t1.doclog.jobs", "t1.doclog.write-ready", "t1.doclog.dead-letters"}, c.Names().All())
}

func TestTopicsConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  kafka.TopicsConfig
		want string
	}{
		{kafka.TopicsConfig{Prefix: "a b"}, `kafka topic prefix "a b" may hold only`},
		{kafka.TopicsConfig{JobsPartitions: -1}, "kafka jobs partitions must be at least 1"},
		{kafka.TopicsConfig{ReplicationFactor: -2}, "kafka replication factor must not be negative"},
		{kafka.TopicsConfig{MinInsyncReplicas: -1}, "kafka min.insync.replicas must be at least 1"},
	} {
		require.ErrorContains(t, tc.cfg.WithDefaults().Validate(), tc.want)
	}
}

func TestSpecsMinInsyncReplicas(t *testing.T) {
	t.Parallel()
	cfg := kafka.TopicsConfig{}.WithDefaults()
	for _, tc := range []struct {
		brokers int
		rf      int16
		minISR  string
	}{
		{brokers: 1, rf: 1, minISR: "1"},
		{brokers: 2, rf: 2, minISR: "2"},
		{brokers: 3, rf: 3, minISR: "2"},
		{brokers: 5, rf: 3, minISR: "2"},
	} {
		for _, s := range cfg.Specs(tc.brokers) {
			require.Equal(t, tc.rf, s.ReplicationFactor, "%d brokers", tc.brokers)
			require.Equal(t, tc.minISR, s.Configs["min.insync.replicas"], "%d brokers", tc.brokers)
		}
	}
	// An explicit replication factor is kept; min.insync.replicas is capped by it.
	cfg = kafka.TopicsConfig{ReplicationFactor: 1, MinInsyncReplicas: 3}.WithDefaults()
	specs := cfg.Specs(5)
	require.Equal(t, int16(1), specs[0].ReplicationFactor)
	require.Equal(t, "1", specs[0].Configs["min.insync.replicas"])

	specs = kafka.TopicsConfig{JobsRetention: -1}.WithDefaults().Specs(1)
	require.Equal(t, "-1", specs[0].Configs["retention.ms"])
	require.Equal(t, "604800000", specs[1].Configs["retention.ms"])
	require.Equal(t, "2592000000", specs[2].Configs["retention.ms"])
}

// topicsBundle is a cluster to run the topic tests against: kfake, or the
// real test broker.
type topicsBundle struct {
	cl  *kgo.Client
	adm *kadm.Client
	cfg kafka.TopicsConfig
}

func kfakeBundle(t *testing.T, brokers int) topicsBundle {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(brokers))
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return topicsBundle{cl: cl, adm: kadm.NewClient(cl), cfg: kafka.TopicsConfig{Prefix: "x.", JobsPartitions: 4}}
}

func realBundle(t *testing.T) topicsBundle {
	t.Helper()
	env := testenv.Kafka(t)
	cl := env.Client()
	return topicsBundle{cl: cl, adm: kadm.NewClient(cl), cfg: env.Topics}
}

func forEachCluster(t *testing.T, fn func(t *testing.T, b topicsBundle)) {
	t.Run("kfake", func(t *testing.T) {
		t.Parallel()
		fn(t, kfakeBundle(t, 1))
	})
	t.Run("kafka", func(t *testing.T) {
		t.Parallel()
		fn(t, realBundle(t))
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestEnsureTopicsIdempotent(t *testing.T) {
	t.Parallel()
	forEachCluster(t, func(t *testing.T, b topicsBundle) {
		states, err := kafka.EnsureTopics(ctx(t), b.cl, b.cfg)
		require.NoError(t, err)
		require.Len(t, states, 3)
		for _, s := range states {
			require.True(t, s.Created, s.Spec.Name)
		}
		require.Equal(t, int32(4), states[0].Partitions)
		require.Equal(t, int32(4), states[1].Partitions)
		require.Equal(t, int32(1), states[2].Partitions)

		states, err = kafka.EnsureTopics(ctx(t), b.cl, b.cfg)
		require.NoError(t, err)
		for _, s := range states {
			require.False(t, s.Created, s.Spec.Name)
		}
		require.NoError(t, kafka.CheckTopics(ctx(t), b.cl, b.cfg))

		require.Len(t, partitions(t, b, b.cfg.Names().Jobs), 4)
	})
}

func TestEnsureTopicsConcurrent(t *testing.T) {
	t.Parallel()
	forEachCluster(t, func(t *testing.T, b topicsBundle) {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		created := make([]int, 4)
		for i := range errs {
			wg.Go(func() {
				states, err := kafka.EnsureTopics(ctx(t), b.cl, b.cfg)
				errs[i] = err
				for _, s := range states {
					if s.Created {
						created[i]++
					}
				}
			})
		}
		wg.Wait()
		total := 0
		for i := range errs {
			require.NoError(t, errs[i])
			total += created[i]
		}
		require.Equal(t, 3, total, "each topic is created exactly once")
	})
}

func TestEnsureTopicsRefusesPartitionMismatch(t *testing.T) {
	t.Parallel()
	forEachCluster(t, func(t *testing.T, b topicsBundle) {
		_, err := kafka.EnsureTopics(ctx(t), b.cl, b.cfg)
		require.NoError(t, err)

		other := b.cfg
		other.JobsPartitions = 6
		other.WriteReadyPartitions = 4
		_, err = kafka.EnsureTopics(ctx(t), b.cl, other)
		var mismatch *kafka.PartitionMismatchError
		require.ErrorAs(t, err, &mismatch)
		require.Equal(t, kafka.PartitionMismatchError{Topic: b.cfg.Names().Jobs, Configured: 6, Existing: 4}, *mismatch)
		require.Contains(t, err.Error(), "topic "+b.cfg.Names().Jobs+" has 4 partitions but doclog is configured for 6")

		err = kafka.CheckTopics(ctx(t), b.cl, other)
		require.ErrorAs(t, err, &mismatch)
		require.Equal(t, b.cfg.Names().Jobs, mismatch.Topic)
	})
}

func TestEnsureTopicsMismatchCreatesNothing(t *testing.T) {
	t.Parallel()
	b := kfakeBundle(t, 1)
	names := b.cfg.Names()
	_, err := b.adm.CreateTopic(ctx(t), 2, 1, nil, names.WriteReady)
	require.NoError(t, err)

	_, err = kafka.EnsureTopics(ctx(t), b.cl, b.cfg)
	var mismatch *kafka.PartitionMismatchError
	require.ErrorAs(t, err, &mismatch)
	require.Equal(t, names.WriteReady, mismatch.Topic)

	require.Len(t, partitions(t, b, names.WriteReady), 2)
	require.Empty(t, partitions(t, b, names.Jobs), "no topic is created while one mismatches")

	var missing *kafka.MissingTopicError
	require.ErrorAs(t, kafka.CheckTopics(ctx(t), b.cl, b.cfg), &missing)
}

func TestEnsureTopicsMinInsyncReplicas(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, b topicsBundle, wantRF int, wantISR string) {
		t.Helper()
		_, err := kafka.EnsureTopics(ctx(t), b.cl, b.cfg)
		require.NoError(t, err)
		names := b.cfg.Names().All()
		for _, name := range names {
			require.Len(t, partitions(t, b, name)[0].Replicas, wantRF, name)
			require.Equal(t, wantISR, topicConfig(t, b, name, "min.insync.replicas"), name)
		}
	}
	t.Run("kafka one broker", func(t *testing.T) {
		t.Parallel()
		check(t, realBundle(t), 1, "1")
	})
	t.Run("kfake one broker", func(t *testing.T) {
		t.Parallel()
		check(t, kfakeBundle(t, 1), 1, "1")
	})
	t.Run("kfake three brokers", func(t *testing.T) {
		t.Parallel()
		check(t, kfakeBundle(t, 3), 3, "2")
	})
	t.Run("explicit replication beyond the cluster", func(t *testing.T) {
		t.Parallel()
		b := kfakeBundle(t, 1)
		b.cfg.ReplicationFactor = 3
		_, err := kafka.EnsureTopics(ctx(t), b.cl, b.cfg)
		require.ErrorContains(t, err, "create kafka topic x.doclog.jobs (4 partitions, replication 3)")
		require.ErrorIs(t, err, kerr.InvalidReplicationFactor)
	})
}

// partitions describes a topic straight from a broker, waiting until the
// broker knows it: kadm's listing is cached, and a KRaft broker learns of a
// new topic a moment after the controller. A topic that stays unknown has
// no partitions.
func partitions(t *testing.T, b topicsBundle, topic string) []kmsg.MetadataResponseTopicPartition {
	t.Helper()
	var parts []kmsg.MetadataResponseTopicPartition
	for range 50 {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx(t), b.cl)
		require.NoError(t, err)
		require.Len(t, resp.Topics, 1)
		if resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) > 0 {
			parts = resp.Topics[0].Partitions
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	slices.SortFunc(parts, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
	return parts
}

// topicConfig reads one setting of a topic, waiting until the broker answers
// for it (a KRaft broker learns of a new topic a moment after the
// controller).
func topicConfig(t *testing.T, b topicsBundle, topic, key string) string {
	t.Helper()
	var last error
	for range 50 {
		configs, err := b.adm.DescribeTopicConfigs(ctx(t), topic)
		if err == nil {
			var rc kadm.ResourceConfig
			if rc, err = configs.On(topic, nil); err == nil && rc.Err == nil {
				for _, c := range rc.Configs {
					if c.Key == key {
						return c.MaybeValue()
					}
				}
				err = fmt.Errorf("no %s in the description", key)
			} else if err == nil {
				err = rc.Err
			}
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("describe %s of topic %s: %v", key, topic, last)
	return ""
}
