package kafka_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/doclog/doclog/kafka"
)

func TestCommitError(t *testing.T) {
	t.Parallel()
	resp := func(codes ...int16) *kmsg.OffsetCommitResponse {
		r := kmsg.NewPtrOffsetCommitResponse()
		topic := kmsg.NewOffsetCommitResponseTopic()
		for i, c := range codes {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = int32(i), c
			topic.Partitions = append(topic.Partitions, p)
		}
		r.Topics = append(r.Topics, topic)
		return r
	}
	require.NoError(t, kafka.CommitError(resp(0, 0), nil))
	down := errors.New("broker down")
	require.ErrorIs(t, kafka.CommitError(nil, down), down)
	require.ErrorIs(t, kafka.CommitError(resp(0, kerr.RebalanceInProgress.Code), nil), kerr.RebalanceInProgress)
}
