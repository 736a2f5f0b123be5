package ingest_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doclog/doclog/ingest"
)

// Accepting a job is per-job detail: it is logged at debug, so a service at
// the default level (info) writes nothing for the jobs it accepts.
func TestAcceptingAJobLogsNothingAtInfo(t *testing.T) {
	t.Parallel()
	kb := setupKafka(t)
	core, logs := observer.New(zap.DebugLevel)
	h := newHandler(t, ingest.Config{JobsTopic: kb.topic}, ingest.Deps{Producer: kb.producer, Logger: zap.New(core)})
	before := logs.Len()

	jobID, docID := accepted(t, do(t, h, request{method: "POST", path: "/v1/jobs", body: mutateBody}))
	require.Equal(t, int64(1), kb.endOffsets(t), "the job reached the broker")

	after := logs.AllUntimed()[before:]
	for _, e := range after {
		require.Less(t, e.Level, zap.InfoLevel, "accepting a job logged %q at %s", e.Message, e.Level)
	}
	entries := logs.FilterMessage("job accepted").FilterField(zap.String("job_id", jobID)).FilterField(zap.String("document_id", docID))
	require.Equal(t, 1, entries.Len(), "the acceptance is still logged, at debug")
	require.Equal(t, zap.DebugLevel, entries.All()[0].Level)
}
