package lagmetrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/doclog/doclog/internal/lagmetrics"
	"github.com/doclog/doclog/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCollectorReportsLag(t *testing.T) {
	env := testenv.Kafka(t)
	topics := env.CreateTopics()
	ctx := context.Background()
	cl := env.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for range 4 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topics.Jobs, Partition: 1, Value: []byte("x"),
			Timestamp: time.Now().Add(-2 * time.Second)}).FirstErr())
	}
	group := env.Group("executor")
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topics.Jobs, Partition: 1, At: 1})
	_, err := env.Admin().CommitOffsets(ctx, group, offsets)
	require.NoError(t, err)

	c := lagmetrics.New(env.Config, []string{group, env.Group("not-deployed")}, time.Millisecond, nil)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var records, seconds, failures float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "doclog_consumer_lag_errors_total" {
				failures = m.GetCounter().GetValue()
				continue
			}
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["topic"] != topics.Jobs || labels["partition"] != "1" {
				continue
			}
			switch mf.GetName() {
			case "doclog_consumer_lag_records":
				records = m.GetGauge().GetValue()
			case "doclog_consumer_lag_seconds":
				seconds = m.GetGauge().GetValue()
			}
		}
	}
	require.Equal(t, 3.0, records)
	require.GreaterOrEqual(t, seconds, 1.5)
	require.Equal(t, 0.0, failures, "a group that does not exist is not an error")
}
