package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionLag is a consumer group's position on one partition.
type PartitionLag struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset, -1 when it has none.
	Committed int64 `json:"committed"`
	End       int64 `json:"end"`
	// Lag is the records between the committed offset and the end.
	Lag int64 `json:"lag"`
	// LagSeconds is the age of the oldest unconsumed record (the one at
	// the committed offset): how far behind in time the group is. 0 when
	// Lag is 0.
	LagSeconds float64 `json:"lagSeconds"`
	// Member is the client id owning the partition, "" when unassigned.
	Member string `json:"member,omitempty"`
}

// ConsumerLag reports each group's lag per partition, in records (from the
// committed offsets, so it reads what the groups made durable) and in
// seconds (from the timestamp of the first unconsumed record).
func ConsumerLag(ctx context.Context, cfg Config, groups ...string) ([]PartitionLag, error) {
	cl, err := NewClient(cfg, nil)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out, err := groupLags(ctx, kadm.NewClient(cl), groups...)
	if err != nil {
		return nil, err
	}
	if err := lagSeconds(ctx, cfg, out); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// groupLags is ConsumerLag in records alone, over an admin client the caller
// keeps: the committed offsets and the partitions' ends, without reading a
// record. A group the brokers do not know has no entry.
func groupLags(ctx context.Context, adm *kadm.Client, groups ...string) ([]PartitionLag, error) {
	lags, err := adm.Lag(ctx, groups...)
	if err != nil {
		return nil, fmt.Errorf("reading consumer lag: %w", err)
	}
	var out []PartitionLag
	for _, group := range groups {
		gl, ok := lags[group]
		if !ok {
			continue
		}
		if err := gl.Error(); err != nil {
			if errors.Is(err, kerr.GroupIDNotFound) {
				continue // a role not deployed, or not started yet
			}
			return nil, fmt.Errorf("reading lag of group %s: %w", group, err)
		}
		for _, l := range gl.Lag.Sorted() {
			if l.Err != nil {
				return nil, fmt.Errorf("reading lag of group %s on %s/%d: %w", group, l.Topic, l.Partition, l.Err)
			}
			pl := PartitionLag{Group: group, Topic: l.Topic, Partition: l.Partition, Committed: l.Commit.At, End: l.End.Offset, Lag: l.Lag}
			if l.Member != nil {
				pl.Member = l.Member.ClientID
			}
			out = append(out, pl)
		}
	}
	return out, nil
}

// lagSeconds fetches the first unconsumed record of each lagging partition
// and sets LagSeconds from its timestamp, one direct consumer per group since
// groups sit at different offsets.
func lagSeconds(ctx context.Context, cfg Config, lags []PartitionLag) error {
	byGroup := map[string][]*PartitionLag{}
	for i := range lags {
		if lags[i].Lag > 0 {
			byGroup[lags[i].Group] = append(byGroup[lags[i].Group], &lags[i])
		}
	}
	for _, group := range byGroup {
		if err := firstUnconsumed(ctx, cfg, group); err != nil {
			return err
		}
	}
	return nil
}

func firstUnconsumed(ctx context.Context, cfg Config, lags []*PartitionLag) error {
	type tp struct {
		topic string
		p     int32
	}
	from := map[string]map[int32]kgo.Offset{}
	for _, l := range lags {
		if from[l.Topic] == nil {
			from[l.Topic] = map[int32]kgo.Offset{}
		}
		from[l.Topic][l.Partition] = kgo.NewOffset().At(max(l.Committed, 0))
	}
	cl, err := NewClient(cfg, nil, kgo.ConsumePartitions(from))
	if err != nil {
		return err
	}
	defer cl.Close()
	first := map[tp]time.Time{}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for len(first) < len(lags) && pctx.Err() == nil {
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			if _, seen := first[k]; !seen {
				first[k] = r.Timestamp
			}
		})
	}
	now := time.Now()
	for _, l := range lags {
		if ts, ok := first[tp{l.Topic, l.Partition}]; ok {
			l.LagSeconds = max(now.Sub(ts).Seconds(), 0)
		}
	}
	return nil
}
