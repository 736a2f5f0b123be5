package kafka_test

import (
	"context"
	"crypto/x509"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/internal/testenv"
	"github.com/doclog/doclog/kafka"
)

// TestSecureListenerProducesAndConsumes sends a record through the test
// broker's SASL_SSL listener and reads it back, with a client built from
// Config alone: TLS trusting the test CA with a client certificate, then
// SCRAM-SHA-512. The listener speaks nothing else, so a record that makes
// the round trip went through both.
func TestSecureListenerProducesAndConsumes(t *testing.T) {
	t.Parallel()
	env := testenv.KafkaSecure(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	topic := env.Topic("secure")
	resp, err := env.Admin().CreateTopic(ctx, 1, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	producer := env.Client()
	want := &kgo.Record{Topic: topic, Key: []byte("doc-1"), Value: []byte("over tls and scram")}
	require.NoError(t, producer.ProduceSync(ctx, want).FirstErr())

	consumer := env.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) == 0 {
		fetches := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "no record came back in time")
		fetches.EachError(func(topic string, partition int32, err error) {
			require.NoError(t, err, "fetch %s/%d", topic, partition)
		})
		got = append(got, fetches.Records()...)
	}
	require.Len(t, got, 1)
	require.Equal(t, want.Key, got[0].Key)
	require.Equal(t, want.Value, got[0].Value)
}

// TestSecureListenerRefuses checks that the secured listener turns away a
// client that lacks any one of the things it asks for, and that the error
// says which.
func TestSecureListenerRefuses(t *testing.T) {
	t.Parallel()
	good := testenv.KafkaSecure(t).Config
	untrusted := filepath.Join(t.TempDir(), "untrusted-ca.pem")
	testenv.WriteFile(t, untrusted, testenv.NewCA(t).CertPEM)

	for _, tc := range []struct {
		name   string
		mutate func(*kafka.Config)
		check  func(t *testing.T, err error)
	}{
		{"wrong password", func(c *kafka.Config) { c.SASL.Password += "-wrong" }, func(t *testing.T, err error) {
			require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		}},
		{"unknown user", func(c *kafka.Config) { c.SASL.Username = "mallory" }, func(t *testing.T, err error) {
			require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		}},
		{"untrusted CA", func(c *kafka.Config) { c.TLS.CAFile = untrusted }, func(t *testing.T, err error) {
			var unknown x509.UnknownAuthorityError
			require.ErrorAs(t, err, &unknown)
		}},
		{"no client certificate", func(c *kafka.Config) { c.TLS.CertFile, c.TLS.KeyFile = "", "" }, func(t *testing.T, err error) {
			// Under TLS 1.3 the client's half of the handshake ends
			// before the broker has checked for a certificate, so the
			// refusal comes as the alert or as the connection it closed.
			require.Regexp(t, `remote error: tls: (bad certificate|certificate required)|connection reset by peer|broken pipe`, err.Error())
		}},
		{"no TLS", func(c *kafka.Config) { c.TLS = kafka.TLSConfig{} }, func(t *testing.T, err error) {
			require.ErrorContains(t, err, "plaintext connection speaking to a tls endpoint")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := good
			tc.mutate(&cfg)
			cl, err := kafka.NewClient(cfg, nil)
			require.NoError(t, err)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			err = cl.Ping(ctx)
			require.Error(t, err)
			require.False(t, errors.Is(err, context.DeadlineExceeded), "the broker should refuse, not time out: %v", err)
			t.Logf("refused: %v", err)
			tc.check(t, err)
		})
	}
}
