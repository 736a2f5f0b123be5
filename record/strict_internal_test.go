package record

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/jsonvalue"
)

// FuzzDecodeStrictAgrees checks the premise of jsonvalue.DecodeStrict's
// fast path on every wire type: whatever encoding/json/v2 accepts strictly,
// encoding/json (v1) with DisallowUnknownFields accepts too and decodes to
// the same value. Where v2 refuses, DecodeStrict falls back to v1, so with
// this premise it behaves exactly as v1 alone.
func FuzzDecodeStrictAgrees(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "records.md"))
	require.NoError(f, err)
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)\n```").FindAllSubmatch(raw, -1) {
		f.Add(m[1])
	}
	for _, s := range []string{
		`{"schema":"doclog.job.v1","jobId":"x","JOBID":"y"}`,
		`{"schema":"doclog.job.v1","jobId":"x","jobId":"y"}`,
		`{"schema":"doclog.job.v1","actions":[{"id":"a","input":null,"context":{ "a" : [1, 2.5e3, "\u00e9"] }}]}`,
		`{"operations":[{"opId":"o","index":-0,"writtenAt":"2026-11-30T12:00:00.123456789+01:00","action":{"input": {"k" :1}}}]}`,
		`{"job":{"schema":"doclog.job.v1","jobId":"x"},"attempts":3}`,
		`{"streams":[{"stream":{"documentId":"d"},"fromIndex":1,"hashes":null}],"consistencyToken":{"coordinates":[]}}`,
		`{"index":1.0}`, `{"index":1e2}`, `{"skip":"1"}`, `null`, `[]`, `{} `, `{}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, jsonvalue.CheckAgreement(data,
			func() any { return new(jobWire) },
			func() any { return new(writeReadyWire) },
			func() any { return new(deadLetterWire) },
		))
	})
}
