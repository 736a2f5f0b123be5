package admin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/kafka"
)

// An operator's look at a topic reads it without a consumer group, so it
// moves nobody's offsets: the partitions' bounds from an admin client, then
// a direct consumer over the range wanted.

// partitionBounds returns each partition's start and end offsets.
func partitionBounds(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	ls, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	le, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	starts, ends = map[int32]int64{}, map[int32]int64{}
	for _, lo := range []struct {
		l   kadm.ListedOffsets
		out map[int32]int64
	}{{ls, starts}, {le, ends}} {
		lo.l.Each(func(o kadm.ListedOffset) {
			if o.Err != nil && err == nil {
				err = fmt.Errorf("offsets of %s partition %d: %w", topic, o.Partition, o.Err)
			}
			lo.out[o.Partition] = o.Offset
		})
	}
	if err != nil {
		return nil, nil, err
	}
	return starts, ends, nil
}

// readPartitions hands fn every record of topic from the offset from names
// for a partition up to, not including, the one until names, in offset
// order per partition. A partition whose range is empty is not read.
func readPartitions(ctx context.Context, cfg kafka.Config, topic string, from, until map[int32]int64, fn func(*kgo.Record)) error {
	at := map[int32]kgo.Offset{}
	remaining := map[int32]int64{} // partition -> end offset still to reach
	for p, o := range from {
		if until[p] > o {
			at[p] = kgo.NewOffset().At(o)
			remaining[p] = until[p]
		}
	}
	if len(remaining) == 0 {
		return nil
	}
	cl, err := kafka.NewClient(cfg, nil, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}))
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(remaining) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s: %w", topic, err)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return fmt.Errorf("reading %s: %w", topic, errs[0].Err)
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			end, ok := remaining[rec.Partition]
			if !ok || rec.Offset >= end {
				return
			}
			if rec.Offset+1 >= end {
				delete(remaining, rec.Partition)
			}
			fn(rec)
		})
	}
	return nil
}
