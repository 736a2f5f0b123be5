package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Base names of doclog's topics; TopicsConfig.Prefix goes in front of each.
const (
	JobsTopic        = "doclog.jobs"
	WriteReadyTopic  = "doclog.write-ready"
	DeadLetterTopic  = "doclog.dead-letters"
	maxTopicNameSize = 249
)

// Defaults applied by TopicsConfig.WithDefaults.
const (
	DefaultJobsPartitions       int32 = 12
	DefaultDeadLetterPartitions int32 = 1
	DefaultReplicationFactor    int16 = 3
	DefaultMinInsyncReplicas          = 2
	DefaultJobsRetention              = 7 * 24 * time.Hour
	DefaultWriteReadyRetention        = 7 * 24 * time.Hour
	DefaultDeadLetterRetention        = 30 * 24 * time.Hour
	configRetentionMs                 = "retention.ms"
	configMinInsyncReplicas           = "min.insync.replicas"
	configCleanupPolicy               = "cleanup.policy"
	configMessageTimestampType        = "message.timestamp.type"
)

// Topics are the names of doclog's topics, prefix included.
type Topics struct {
	Jobs        string
	WriteReady  string
	DeadLetters string
}

// TopicNames returns the topic names under prefix ("" for the defaults).
func TopicNames(prefix string) Topics {
	return Topics{
		Jobs:        prefix + JobsTopic,
		WriteReady:  prefix + WriteReadyTopic,
		DeadLetters: prefix + DeadLetterTopic,
	}
}

// All lists the names in a fixed order: jobs, write-ready, dead letters.
func (t Topics) All() []string { return []string{t.Jobs, t.WriteReady, t.DeadLetters} }

// TopicsConfig describes doclog's topics. Partition counts are fixed for the
// life of a topic: a document's partition is hash(documentId) mod the count,
// so changing it would split a document's jobs across members.
type TopicsConfig struct {
	// Prefix goes in front of every topic name, so tests and several
	// installations can share a cluster. Default "".
	Prefix string
	// JobsPartitions bounds how many executors work in parallel. Default 12.
	JobsPartitions int32
	// WriteReadyPartitions bounds projector parallelism. Default: the same as
	// JobsPartitions, so an executor's partition maps onto one write-ready
	// partition.
	WriteReadyPartitions int32
	// DeadLetterPartitions is small: dead letters are rare and an operator
	// lists them in order. Default 1.
	DeadLetterPartitions int32
	// ReplicationFactor of every topic. Default: 3, or the number of brokers
	// when the cluster has fewer (a one-broker test cluster gets 1). An
	// explicit value larger than the cluster is an error from the broker.
	ReplicationFactor int16
	// MinInsyncReplicas is set on every topic so that acks=all means the
	// record is on that many replicas. Default 2. It is capped at the
	// replication factor, so a one-broker cluster gets 1 rather than topics
	// nothing can be produced to.
	MinInsyncReplicas int
	// JobsRetention must outlast the longest executor outage doclog is to
	// survive: an unread job that expires is lost. Default 7 days; negative
	// keeps records forever.
	JobsRetention time.Duration
	// WriteReadyRetention must outlast the longest projector outage; past
	// it a projector heals from the log. Default 7 days; negative keeps
	// records forever.
	WriteReadyRetention time.Duration
	// DeadLetterRetention is how long an operator has to look at and redrive
	// a dead letter. Default 30 days; negative keeps records forever.
	DeadLetterRetention time.Duration
}

// WithDefaults returns a copy with every unset field at its default.
func (c TopicsConfig) WithDefaults() TopicsConfig {
	if c.JobsPartitions == 0 {
		c.JobsPartitions = DefaultJobsPartitions
	}
	if c.WriteReadyPartitions == 0 {
		c.WriteReadyPartitions = c.JobsPartitions
	}
	if c.DeadLetterPartitions == 0 {
		c.DeadLetterPartitions = DefaultDeadLetterPartitions
	}
	if c.MinInsyncReplicas == 0 {
		c.MinInsyncReplicas = DefaultMinInsyncReplicas
	}
	if c.JobsRetention == 0 {
		c.JobsRetention = DefaultJobsRetention
	}
	if c.WriteReadyRetention == 0 {
		c.WriteReadyRetention = DefaultWriteReadyRetention
	}
	if c.DeadLetterRetention == 0 {
		c.DeadLetterRetention = DefaultDeadLetterRetention
	}
	return c
}

// Validate reports the first setting that cannot work. Call it on the result
// of WithDefaults.
func (c TopicsConfig) Validate() error {
	if len(c.Prefix)+len(DeadLetterTopic) > maxTopicNameSize {
		return fmt.Errorf("kafka topic prefix is %d bytes long; topic names must stay within %d", len(c.Prefix), maxTopicNameSize)
	}
	for _, r := range c.Prefix {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("kafka topic prefix %q may hold only letters, digits, '.', '_' and '-'", c.Prefix)
		}
	}
	for _, p := range []struct {
		name string
		n    int32
	}{{"jobs", c.JobsPartitions}, {"write-ready", c.WriteReadyPartitions}, {"dead-letter", c.DeadLetterPartitions}} {
		if p.n < 1 {
			return fmt.Errorf("kafka %s partitions must be at least 1, got %d", p.name, p.n)
		}
	}
	if c.ReplicationFactor < 0 {
		return fmt.Errorf("kafka replication factor must not be negative, got %d", c.ReplicationFactor)
	}
	if c.MinInsyncReplicas < 1 {
		return fmt.Errorf("kafka min.insync.replicas must be at least 1, got %d", c.MinInsyncReplicas)
	}
	return nil
}

// Names returns the topic names under the configured prefix.
func (c TopicsConfig) Names() Topics { return TopicNames(c.Prefix) }

// TopicSpec is one topic as doclog creates it.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	// Configs are the topic-level settings (retention.ms,
	// min.insync.replicas, …) given at creation.
	Configs map[string]string
}

// Specs resolves the configuration against a cluster of the given number of
// live brokers: the replication factor defaults to at most that many, and
// min.insync.replicas never exceeds the replication factor. Call it on the
// result of WithDefaults.
func (c TopicsConfig) Specs(brokers int) []TopicSpec {
	rf := c.ReplicationFactor
	if rf == 0 {
		rf = DefaultReplicationFactor
		if brokers > 0 && int(rf) > brokers {
			rf = int16(brokers)
		}
	}
	minISR := min(c.MinInsyncReplicas, int(rf))
	names := c.Names()
	spec := func(name string, partitions int32, retention time.Duration) TopicSpec {
		return TopicSpec{
			Name:              name,
			Partitions:        partitions,
			ReplicationFactor: rf,
			Configs: map[string]string{
				configRetentionMs:       retentionMs(retention),
				configMinInsyncReplicas: strconv.Itoa(minISR),
				configCleanupPolicy:     "delete",
				// Latency metrics read the record timestamp as the time
				// the producer sent it.
				configMessageTimestampType: "CreateTime",
			},
		}
	}
	return []TopicSpec{
		spec(names.Jobs, c.JobsPartitions, c.JobsRetention),
		spec(names.WriteReady, c.WriteReadyPartitions, c.WriteReadyRetention),
		spec(names.DeadLetters, c.DeadLetterPartitions, c.DeadLetterRetention),
	}
}

func retentionMs(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// PartitionMismatchError reports an existing topic whose partition count is
// not the configured one. doclog refuses to run against it: documents would
// hash to other partitions than the ones their earlier jobs are on, and
// per-document order would be lost.
type PartitionMismatchError struct {
	Topic      string
	Configured int32
	Existing   int32
}

func (e *PartitionMismatchError) Error() string {
	return fmt.Sprintf("topic %s has %d partitions but doclog is configured for %d: refusing to run, since documents would move to other partitions; configure %d partitions or recreate the topic",
		e.Topic, e.Existing, e.Configured, e.Existing)
}

// MissingTopicError reports a topic CheckTopics expected to exist.
type MissingTopicError struct {
	Topic string
}

func (e *MissingTopicError) Error() string {
	return fmt.Sprintf("topic %s does not exist: create it with `doclogctl topics create` or let doclog create it at start-up", e.Topic)
}

// TopicState is what EnsureTopics found or did for one topic.
type TopicState struct {
	Spec TopicSpec
	// Created is true when this call created the topic; false when it
	// existed already (and was checked).
	Created bool
	// Partitions is the topic's partition count on the cluster.
	Partitions int32
}

// EnsureTopics creates the configured topics that do not exist yet and checks
// the partition count of those that do. It is safe to run from many members
// at once: a topic another member created in between is checked like any
// existing one. Settings of existing topics other than the partition count
// are left as they are, since operators may have tuned them.
//
// Every mismatching topic is reported, as a *PartitionMismatchError each
// (joined), and nothing is created when any existing topic mismatches.
func EnsureTopics(ctx context.Context, cl *kgo.Client, cfg TopicsConfig) ([]TopicState, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list kafka brokers: %w", err)
	}
	return EnsureSpecs(ctx, cl, cfg.Specs(len(brokers)))
}

// EnsureSpecs is EnsureTopics for resolved specs.
func EnsureSpecs(ctx context.Context, cl *kgo.Client, specs []TopicSpec) ([]TopicState, error) {
	existing, err := describe(ctx, cl, specs)
	if err != nil {
		return nil, err
	}
	states := make([]TopicState, len(specs))
	var errs []error
	for i, s := range specs {
		states[i].Spec = s
		if n, ok := existing[s.Name]; ok {
			states[i].Partitions = n
			if n != s.Partitions {
				errs = append(errs, &PartitionMismatchError{Topic: s.Name, Configured: s.Partitions, Existing: n})
			}
		}
	}
	if len(errs) > 0 {
		return states, errors.Join(errs...)
	}
	for i, s := range specs {
		if _, ok := existing[s.Name]; ok {
			continue
		}
		created, err := create(ctx, cl, s)
		if err != nil {
			return states, err
		}
		states[i].Created = created
		states[i].Partitions = s.Partitions
		if created {
			if err := awaitServing(ctx, cl, s); err != nil {
				return states, err
			}
		} else {
			// Another member won the race: check what it made.
			n, err := awaitPartitions(ctx, cl, s)
			if err != nil {
				return states, err
			}
			states[i].Partitions = n
			if n != s.Partitions {
				errs = append(errs, &PartitionMismatchError{Topic: s.Name, Configured: s.Partitions, Existing: n})
			}
		}
	}
	return states, errors.Join(errs...)
}

// CheckTopics verifies, without creating anything, that every configured
// topic exists with the configured partition count. Roles that must not
// create topics run it at start-up.
func CheckTopics(ctx context.Context, cl *kgo.Client, cfg TopicsConfig) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	specs := cfg.Specs(0)
	existing, err := describe(ctx, cl, specs)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range specs {
		n, ok := existing[s.Name]
		switch {
		case !ok:
			errs = append(errs, &MissingTopicError{Topic: s.Name})
		case n != s.Partitions:
			errs = append(errs, &PartitionMismatchError{Topic: s.Name, Configured: s.Partitions, Existing: n})
		}
	}
	return errors.Join(errs...)
}

// describe returns the partition count of each spec's topic that exists. It
// asks a broker directly: kadm's listing goes through the client's metadata
// cache, which can still say "unknown" right after a create, or miss a topic
// another member just created.
func describe(ctx context.Context, cl *kgo.Client, specs []TopicSpec) (map[string]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, s := range specs {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(s.Name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("describe kafka topics: %w", err)
	}
	out := make(map[string]int32, len(specs))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		err := kerr.ErrorForCode(t.ErrorCode)
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			continue
		case err != nil:
			return nil, fmt.Errorf("describe kafka topic %s: %w", *t.Topic, err)
		}
		out[*t.Topic] = int32(len(t.Partitions))
	}
	return out, nil
}

// awaitPartitions describes a topic the controller says exists until the
// broker answering metadata knows it too: in KRaft a broker's metadata
// trails the controller's by a moment.
func awaitPartitions(ctx context.Context, cl *kgo.Client, s TopicSpec) (int32, error) {
	const limit = 10 * time.Second
	deadline := time.Now().Add(limit)
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		found, err := describe(ctx, cl, []TopicSpec{s})
		if err != nil {
			return 0, err
		}
		if n, ok := found[s.Name]; ok && n > 0 {
			return n, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("kafka topic %s exists but no broker described it within %s", s.Name, limit)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("describe kafka topic %s: %w", s.Name, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// awaitServing waits until every partition of a topic just created answers
// a ListOffsets request from its leader. Until then a produce can fail with
// UNKNOWN_TOPIC_OR_PARTITION: a KRaft broker learns of a new topic, and then
// creates its partitions' logs, a moment after the controller committed it —
// a long moment on a loaded machine.
func awaitServing(ctx context.Context, cl *kgo.Client, s TopicSpec) error {
	const limit = 60 * time.Second
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(limit)
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		offsets, err := adm.ListEndOffsets(ctx, s.Name)
		if err == nil {
			err = offsets.Error()
		}
		if err == nil && len(offsets[s.Name]) == int(s.Partitions) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kafka topic %s was created but its partitions did not serve within %s: %v", s.Name, limit, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for kafka topic %s to serve: %w", s.Name, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// create creates one topic; false without error means it already existed.
func create(ctx context.Context, cl *kgo.Client, s TopicSpec) (bool, error) {
	configs := make(map[string]*string, len(s.Configs))
	for k, v := range s.Configs {
		configs[k] = kadm.StringPtr(v)
	}
	_, err := kadm.NewClient(cl).CreateTopic(ctx, s.Partitions, s.ReplicationFactor, configs, s.Name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		return false, nil
	}
	return false, fmt.Errorf("create kafka topic %s (%d partitions, replication %d): %w", s.Name, s.Partitions, s.ReplicationFactor, err)
}
