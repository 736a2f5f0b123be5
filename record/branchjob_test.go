package record_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

func branchJob(kind record.Kind) *record.Job {
	j := &record.Job{JobID: jobID, Kind: kind, DocumentID: docID, DocumentType: "doclog/ledger", Branch: "draft"}
	switch kind {
	case record.KindFork:
		j.Branch = oplog.DefaultBranch
		j.Fork = &record.Fork{Branch: "dr\"aft", At: map[string]int64{"global": 3, "document": 1}}
	case record.KindPromote:
		j.Promote = &record.Promote{Onto: oplog.DefaultBranch, ExpectedTip: map[string]int64{"document": 1}}
	}
	return j
}

// Branch jobs round-trip through their encoder and the strict decoder, and
// their encoding is what the schema describes.
func TestBranchJobsRoundTrip(t *testing.T) {
	t.Parallel()
	schemas := compileSchemas(t)
	for _, kind := range []record.Kind{record.KindFork, record.KindPromote, record.KindDeleteBranch} {
		j := branchJob(kind)
		rec, err := record.NewJobRecord("jobs", j)
		require.NoError(t, err, kind)
		require.NoError(t, validateAgainst(t, schemas[record.SchemaJobV1], rec.Value), "%s: %s", kind, rec.Value)
		got, err := record.DecodeJob(rec)
		require.NoError(t, err, kind)
		require.Equal(t, j.Fork, got.Fork)
		require.Equal(t, j.Promote, got.Promote)
		require.Equal(t, kind, got.Kind)
		require.True(t, got.Kind.IsBranchKind())
	}
	require.False(t, record.KindMutate.IsBranchKind())
}

// What the branch kinds refuse, refused by the decoder and the schema alike.
func TestBranchJobsRefused(t *testing.T) {
	t.Parallel()
	schemas := compileSchemas(t)
	head := `{"schema":"doclog.job.v1","jobId":"` + jobID + `","documentId":"d","documentType":"t",`
	for _, tc := range []struct{ name, value, field string }{
		{"fork without fork", head + `"kind":"fork","actions":[]}`, "fork"},
		{"fork with actions", head + `"kind":"fork","actions":[{"id":"a","type":"X","scope":"global","timestampUtcMs":1}],"fork":{"branch":"b"}}`, "actions"},
		{"fork at a negative index", head + `"kind":"fork","actions":[],"fork":{"branch":"b","at":{"global":-1}}}`, `fork.at."global"`},
		{"fork with promote", head + `"kind":"fork","actions":[],"fork":{"branch":"b"},"promote":{"onto":"main","expectedTip":{}}}`, "promote"},
		{"promote without expected tip", head + `"kind":"promote","branch":"b","actions":[],"promote":{"onto":"main"}}`, "promote.expectedTip"},
		{"delete main", head + `"kind":"delete-branch","branch":"main","actions":[]}`, "branch"},
		{"mutate with fork", head + `"kind":"mutate","actions":[{"id":"a","type":"X","scope":"global","timestampUtcMs":1}],"fork":{"branch":"b"}}`, "fork"},
	} {
		_, err := record.ParseJob([]byte(tc.value))
		var de *record.DecodeError
		require.ErrorAs(t, err, &de, tc.name)
		require.Contains(t, err.Error(), tc.field, tc.name)
		require.Error(t, validateAgainst(t, schemas[record.SchemaJobV1], []byte(tc.value)), "schema accepts %s", tc.name)
	}
}
