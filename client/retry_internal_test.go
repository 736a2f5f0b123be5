package client

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/backoff"
)

func TestBackoffDoublesWithinBounds(t *testing.T) {
	t.Parallel()
	base, max := 100*time.Millisecond, time.Second
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 40: time.Second} {
		for range 50 {
			d := backoff.Exponential(base, max, n)
			require.GreaterOrEqual(t, d, want/2, "retry %d", n)
			require.LessOrEqual(t, d, want, "retry %d", n)
		}
	}
	require.Zero(t, backoff.Exponential(0, 0, 3))
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"1":                             time.Second,
		" 7 ":                           7 * time.Second,
		"0":                             0,
		"-3":                            0,
		"soon":                          0,
		"Tue, 01 Dec 2026 18:00:30 GMT": 30 * time.Second,
		"Tue, 01 Dec 2026 17:59:00 GMT": 0,
		"999999999999":                  24 * time.Hour,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		require.Equal(t, want, RetryAfter(h, now), "Retry-After %q", v)
	}
	// Retry-After-Ms, when valid, is the finer of the two.
	for _, tc := range []struct {
		ms, seconds string
		want        time.Duration
	}{
		{"250", "1", 250 * time.Millisecond},
		{"1500", "2", 1500 * time.Millisecond},
		{"0", "1", time.Second},
		{"-5", "1", time.Second},
		{"soon", "3", 3 * time.Second},
		{"250", "", 250 * time.Millisecond},
		{"999999999999999", "1", 24 * time.Hour},
	} {
		h := http.Header{}
		h.Set("Retry-After-Ms", tc.ms)
		if tc.seconds != "" {
			h.Set("Retry-After", tc.seconds)
		}
		require.Equal(t, tc.want, RetryAfter(h, now), "Retry-After-Ms %q, Retry-After %q", tc.ms, tc.seconds)
	}
}

func TestFormatWait(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{0: "0", -time.Second: "0", time.Microsecond: "1ms", 25 * time.Second: "25000ms", 1500 * time.Millisecond: "1500ms"} {
		require.Equal(t, want, formatWait(d))
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{IngestURL: "http://127.0.0.1:8080"}.WithDefaults()
	require.NoError(t, ok.Validate())
	require.Equal(t, DefaultMaxAttempts, ok.MaxAttempts)
	require.Equal(t, DefaultBaseDelay, ok.BaseDelay)
	require.Equal(t, DefaultMaxDelay, ok.MaxDelay)
	require.Equal(t, DefaultUserAgent, ok.UserAgent)
	require.NotNil(t, ok.HTTPClient)
	require.Zero(t, ok.HTTPClient.Timeout, "the default client does not cut long polls and feeds")

	tokens := Config{IngestURL: "http://x", Token: "t", ReadToken: "r"}.WithDefaults()
	require.Equal(t, "t", tokens.WriteToken)
	require.Equal(t, "r", tokens.ReadToken)
	onlyWrite := Config{IngestURL: "http://x", WriteToken: "w"}.WithDefaults()
	require.Equal(t, "w", onlyWrite.ReadToken, "a write token may read")

	for cfg, want := range map[*Config]string{
		{}:                                       "IngestURL or ReadstoreURL is required",
		{IngestURL: "127.0.0.1:8080"}:            "IngestURL",
		{ReadstoreURL: "ftp://x"}:                "scheme must be http or https",
		{ReadstoreURL: "http://x?y=1"}:           "no query",
		{IngestURL: "http://x", MaxAttempts: -1}: "MaxAttempts must be at least 1",
		{IngestURL: "http://x", BaseDelay: time.Second, MaxDelay: 1}: "MaxDelay",
		{IngestURL: "http://x", BaseDelay: -time.Second}:             "BaseDelay must not be negative",
		{IngestURL: "http://x", JobPollWait: -time.Second}:           "JobPollWait",
	} {
		err := cfg.WithDefaults().Validate()
		require.ErrorContains(t, err, want)
		_, err = New(*cfg)
		require.ErrorContains(t, err, want, "New validates")
	}
}
