package ctlcli

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/internal/testenv"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	env := testenv.Kafka(t)
	topics := env.CreateTopics()
	url := migrated(t)
	ctx := context.Background()

	// Five records on partition 0 of the jobs topic, written a moment ago,
	// and an executor group that has committed two of them.
	cl := env.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 5 {
		rec := &kgo.Record{Topic: topics.Jobs, Partition: 0, Value: []byte(fmt.Sprint(i)), Timestamp: time.Now().Add(-3 * time.Second)}
		require.NoError(t, cl.ProduceSync(ctx, rec).FirstErr())
	}
	group := env.Topics.Prefix + "doclog-executor"
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topics.Jobs, Partition: 0, At: 2})
	_, err := env.Admin().CommitOffsets(ctx, group, offsets)
	require.NoError(t, err)

	// A KRaft broker lists a new topic a moment after creating it.
	var rep statusReport
	var out string
	require.Eventually(t, func() bool {
		code, o, errOut := ctl(t, "status", "-o", "json", "--database-url", url,
			"--kafka-seeds", strings.Join(env.Config.Seeds, ","), "--topics-prefix", env.Topics.Prefix, "--groups", "doclog-executor")
		require.Equal(t, exitOK, code, errOut)
		out = o
		rep = statusReport{}
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		for _, tp := range rep.Topics {
			if !tp.Exists {
				return false
			}
		}
		return true
	}, 20*time.Second, 200*time.Millisecond)
	require.NotEmpty(t, rep.Brokers)
	// Each topic with the partitions and retention it was created with.
	specs := env.Topics.WithDefaults().Specs(len(rep.Brokers))
	require.Len(t, rep.Topics, len(specs))
	for i, spec := range specs {
		tp := rep.Topics[i]
		require.Equal(t, spec.Name, tp.Topic)
		require.True(t, tp.Exists, tp.Topic)
		require.Equal(t, int(spec.Partitions), tp.Partitions, tp.Topic)
		require.Equal(t, spec.Configs["retention.ms"], strconv.FormatInt(tp.RetentionMs, 10), tp.Topic)
	}
	// The migrations counted are those migrate status lists, the log's
	// and every Postgres projector's.
	_, listed, _ := ctl(t, "migrate", "status", "-o", "json", "--database-url", url)
	var rows []migrationRow
	require.NoError(t, json.Unmarshal([]byte(listed), &rows))
	require.Greater(t, len(rows), 1)
	require.Equal(t, len(rows), rep.Migrations.Known)
	require.Equal(t, len(rows), rep.Migrations.Applied)
	var p0 *struct {
		lag  int64
		secs float64
	}
	for _, l := range rep.Lag {
		if l.Topic == topics.Jobs && l.Partition == 0 {
			p0 = &struct {
				lag  int64
				secs float64
			}{l.Lag, l.LagSeconds}
			require.Equal(t, int64(2), l.Committed)
			require.Equal(t, int64(5), l.End)
		}
	}
	require.NotNil(t, p0, "partition 0 of the jobs topic is reported: %s", out)
	require.Equal(t, int64(3), p0.lag)
	require.GreaterOrEqual(t, p0.secs, 2.5, "the oldest unconsumed record is about 3 s old")

	code, out, errOut := ctl(t, "status", "--database-url", url,
		"--kafka-seeds", strings.Join(env.Config.Seeds, ","), "--topics-prefix", env.Topics.Prefix)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, fmt.Sprintf("migrations %d/%d applied", len(rows), len(rows)))
	require.Regexp(t, `│ `+regexp.QuoteMeta(topics.Jobs)+` +│ +4 │ +\d+ │ 7d +│`, out, "the jobs topic: 4 partitions, kept 7 days")
}
