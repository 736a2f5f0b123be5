package admin

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TopicDescription is one topic as the brokers describe it: its partitions,
// replicas, the sum of its partitions' end offsets, its retention and the
// settings set on the topic itself.
type TopicDescription struct {
	Topic       string `json:"topic"`
	Exists      bool   `json:"exists"`
	Partitions  int    `json:"partitions"`
	Replication int    `json:"replicationFactor"`
	// EndOffsetSum is the sum of the partitions' high watermarks: the
	// records ever written, retention aside.
	EndOffsetSum int64 `json:"endOffsetSum"`
	// RetentionMs is the effective retention.ms, from the topic or the
	// broker's default; -1 keeps records for ever.
	RetentionMs int64 `json:"retentionMs"`
	// Configs are retention.ms, min.insync.replicas and every setting
	// set on the topic.
	Configs map[string]string `json:"configs"`
}

// DescribeTopics describes the named topics, in the order given; a topic
// that does not exist is reported with Exists false.
func DescribeTopics(ctx context.Context, adm *kadm.Client, names ...string) ([]TopicDescription, error) {
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	var existing []string
	for _, name := range names {
		if d, ok := details[name]; ok && d.Err == nil {
			existing = append(existing, name)
		}
	}
	var configs kadm.ResourceConfigs
	if len(existing) > 0 {
		if configs, err = adm.DescribeTopicConfigs(ctx, existing...); err != nil {
			return nil, fmt.Errorf("describing topic configs: %w", err)
		}
	}
	out := make([]TopicDescription, 0, len(names))
	for _, name := range names {
		d, ok := details[name]
		td := TopicDescription{Topic: name, Exists: ok && d.Err == nil, Configs: map[string]string{}}
		if td.Exists {
			td.Partitions = len(d.Partitions)
			td.Replication = d.Partitions.NumReplicas()
			ends.Each(func(o kadm.ListedOffset) {
				if o.Topic == name && o.Err == nil {
					td.EndOffsetSum += o.Offset
				}
			})
			rc, err := configs.On(name, nil)
			if err != nil {
				return nil, fmt.Errorf("describing topic %s: %w", name, err)
			}
			if rc.Err != nil {
				return nil, fmt.Errorf("describing topic %s: %w", name, rc.Err)
			}
			for _, c := range rc.Configs {
				if c.Value != nil && (c.Source == 1 /* topic config */ || c.Key == "retention.ms" || c.Key == "min.insync.replicas") {
					td.Configs[c.Key] = *c.Value
				}
			}
			if v, ok := td.Configs["retention.ms"]; ok {
				if td.RetentionMs, err = strconv.ParseInt(v, 10, 64); err != nil {
					return nil, fmt.Errorf("topic %s: retention.ms %q is not a number", name, v)
				}
			}
		}
		out = append(out, td)
	}
	return out, nil
}
