package chaos_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/chaos"
)

// TestShortChaos is the short chaos run: the real binary, one process per
// role, on a broker and a Postgres of the test's own (it kills and restarts
// them), with kills of members and ingest, a broker and a Postgres restart
// under a minute of load. ClickHouse is the test server's when
// TEST_CLICKHOUSE_ADDR is set.
func TestShortChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: the chaos run takes two minutes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var log strings.Builder
	c := chaos.Config{
		Seed: 7, Profile: chaos.Short, Rate: 60, Workers: 32,
		DrainLimit: 10 * time.Second, Settle: 40 * time.Second, VerifyWait: 30 * time.Second,
		ClickHouseAddr: os.Getenv("TEST_CLICKHOUSE_ADDR"),
		Logf:           func(format string, args ...any) { t.Logf(format, args...) },
	}
	r, err := chaos.Run(ctx, c)
	require.NoError(t, err)
	r.Print(&log)
	t.Log(log.String())
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(r.Dir)
		}
	})

	kills := 0
	for _, in := range r.Faults {
		if in.Kind == chaos.FaultKill || in.Kind == chaos.FaultKillIngest {
			kills++
		}
	}
	assert.GreaterOrEqual(t, kills, 5, "kills injected")
	assert.Greater(t, r.Acked, 500, "jobs acknowledged under the faults")
	assert.Positive(t, r.FailedBy["BusinessRuleViolation"], "the overdrafts ended FAILED with their reason")
	assert.Empty(t, r.Failures())
}
