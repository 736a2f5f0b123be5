package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// JobRecords reads the jobs topic from start to end and counts the records
// per job id, so the report can show that the retries really put duplicate
// records of one job on the topic, the case the executor must settle once.
func JobRecords(ctx context.Context, seeds, topic string) (records, dupJobs int, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, 0, fmt.Errorf("connecting to the broker: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, 0, fmt.Errorf("listing the end offsets of %s: %w", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	seen := map[string]int{}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, 0, fmt.Errorf("reading %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var v struct {
				JobID string `json:"jobId"`
			}
			if json.Unmarshal(r.Value, &v) == nil && v.JobID != "" {
				records++
				seen[v.JobID]++
			}
			// Ingest produces without transactions: no control records,
			// so the last offset is end-1.
			if end, ok := left[r.Partition]; ok && r.Offset >= end-1 {
				delete(left, r.Partition)
			}
		})
	}
	for _, n := range seen {
		if n > 1 {
			dupJobs++
		}
	}
	return records, dupJobs, nil
}
