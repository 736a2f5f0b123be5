package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Defaults of Membership.
const (
	DefaultSessionTimeout    = 10 * time.Second
	DefaultHeartbeatInterval = time.Second
)

// Membership is how a process takes part in the consumer groups of its
// roles (the executors' group, one group per projector).
//
// A member that dies without leaving — kill -9, an OOM kill, a node lost —
// holds its partitions until its session times out; nothing else can move
// them. Two settings bound that. SessionTimeout is how long the wait is
// (Kafka's consumer default of 45s left a chaos run's partitions idle for
// most of a minute after each kill). MemberName makes the process a static
// member (KIP-345, group.instance.id): restarted under the same name, it
// takes its partitions back at once, without a rebalance and without waiting
// for the dead member's session, so a crash-restart costs seconds.
//
// The consumer protocol of KIP-848 was measured against it on Kafka 4.4 and
// not chosen (docs/operating.md has the figures): its session timeout is the
// broker's (group.consumer.session.timeout.ms, 45s by default), which the
// client cannot shorten, and a static member restarted after kill -9 is
// refused (UNRELEASED_INSTANCE_ID) until the dead member's session expires,
// so a crash-restart took 42s there against under a second here.
type Membership struct {
	// MemberName names this process in every group it joins, as a static
	// member. It must be unique among the processes of a deployment and
	// stable across restarts of one: the pod name in Kubernetes (the chart
	// sets it so), a host name plus an index elsewhere. Two live processes
	// with one name fence each other. Default none: dynamic members.
	MemberName string
	// SessionTimeout is how long a member that stops heartbeating keeps its
	// partitions. It must lie within the broker's group.min.session.
	// timeout.ms and group.max.session.timeout.ms (6s and 30min by
	// default). Default 10s.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often a member tells the group coordinator
	// it is alive; well below SessionTimeout. Default 1s.
	HeartbeatInterval time.Duration
}

// WithDefaults returns a copy with every unset field at its default.
func (m Membership) WithDefaults() Membership {
	if m.SessionTimeout == 0 {
		m.SessionTimeout = DefaultSessionTimeout
	}
	if m.HeartbeatInterval == 0 {
		m.HeartbeatInterval = DefaultHeartbeatInterval
	}
	return m
}

// Validate reports a setting that cannot work. Call it on the result of
// WithDefaults.
func (m Membership) Validate() error {
	if m.SessionTimeout <= 0 || m.HeartbeatInterval <= 0 {
		return fmt.Errorf("kafka session timeout (%s) and heartbeat interval (%s) must be positive", m.SessionTimeout, m.HeartbeatInterval)
	}
	if m.HeartbeatInterval*3 > m.SessionTimeout {
		return fmt.Errorf("kafka heartbeat interval %s must be at most a third of the session timeout %s, so that one lost heartbeat does not end the session", m.HeartbeatInterval, m.SessionTimeout)
	}
	if len(m.MemberName) > 249 {
		return fmt.Errorf("kafka member name is %d bytes, more than the 249 Kafka allows for a group instance id", len(m.MemberName))
	}
	for _, r := range m.MemberName {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("kafka member name %q may hold only ASCII letters, digits, '.', '_' and '-', as Kafka requires of a group instance id", m.MemberName)
		}
	}
	return nil
}

// GroupOptions are the client options of a group member with this
// membership. A role appends its own after them to override.
func (m Membership) GroupOptions() []kgo.Opt {
	m = m.WithDefaults()
	opts := []kgo.Opt{kgo.SessionTimeout(m.SessionTimeout), kgo.HeartbeatInterval(m.HeartbeatInterval)}
	if m.MemberName != "" {
		opts = append(opts, kgo.InstanceID(m.MemberName))
	}
	return opts
}

// Leave takes a static member out of group after its client closed. Closing
// a client does not leave for a static member (that is what lets a restart
// take the partitions back), so a member stopped on purpose — a scale-down, a
// node drained — would otherwise hold its partitions for SessionTimeout. A
// dynamic member left when its client closed: Leave does nothing for it.
func Leave(ctx context.Context, c Config, group string, logger *zap.Logger) error {
	name := c.Membership.MemberName
	if name == "" {
		return nil
	}
	cl, err := NewClient(c, nil)
	if err != nil {
		return fmt.Errorf("leave group %s as %s: %w", group, name, err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs(name).Reason("stopped"))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("leave group %s as %s: %w", group, name, err)
	}
	if logger != nil {
		logger.Info("left the group", zap.String("group", group), zap.String("member", name))
	}
	return nil
}
