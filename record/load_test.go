package record_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/record"
)

func sampleLoadJob() *record.Job {
	return &record.Job{
		JobID: jobID, Kind: record.KindLoad, DocumentID: docID, DocumentType: "doclog/ledger", Branch: "main",
		Actions: []oplog.Action{},
		Operations: []record.LoadOperation{
			{OpID: "op-a", Index: 0, Skip: 0, Hash: "h0", Action: oplog.Action{ID: "a1", Type: "ADD_ENTRY", Scope: "global", TimestampUtcMs: 5, Input: json.RawMessage(`{"amount":1}`)}},
			{OpID: "op-b", Index: 1, Skip: 1, Hash: "h1", Action: oplog.Action{ID: "a2", Type: "ADD_ENTRY", Scope: "global", TimestampUtcMs: 6, Context: json.RawMessage(`{"user":"ana"}`)}},
		},
	}
}

func TestLoadJobRoundTrip(t *testing.T) {
	t.Parallel()
	j := sampleLoadJob()
	rec, err := record.NewJobRecord("doclog.jobs", j)
	require.NoError(t, err)
	require.Contains(t, string(rec.Value), `"operations":[{"opId":"op-a","index":0,"skip":0,"hash":"h0","action":{"id":"a1"`)
	got, err := record.DecodeJob(rec)
	require.NoError(t, err)
	require.Equal(t, j, got)
}

func TestLoadJobRefusals(t *testing.T) {
	t.Parallel()
	valid := string(sampleLoadJob().AppendJSON(nil))
	replace := func(old, new string) string {
		require.Contains(t, valid, old)
		return strings.Replace(valid, old, new, 1)
	}
	mutate := string(sampleJob().AppendJSON(nil))
	for _, tc := range []struct {
		name, value string
		typ         record.ErrorType
		reason      string
	}{
		{"no operations", replace(valid[strings.Index(valid, `,"operations"`):strings.LastIndex(valid, "]")+1], ""), record.ErrInvalidAction, "operations: a load job needs at least one operation"},
		{"actions too", replace(`"actions":[]`, `"actions":[{"id":"x","type":"T","scope":"global","timestampUtcMs":1}]`), record.ErrDecode, "actions: a load job carries operations, not actions"},
		{"operations on a mutate job", strings.Replace(mutate, `"actions":`, `"operations":[{"opId":"o","index":0,"skip":0,"hash":"h","action":{"id":"x","type":"T","scope":"global","timestampUtcMs":1}}],"actions":`, 1), record.ErrDecode, "operations: only a load job carries operations"},
		{"repeated opId", replace(`"opId":"op-b"`, `"opId":"op-a"`), record.ErrInvalidAction, `operations[1].opId: "op-a" repeats the opId of operations[0]`},
		{"skip beyond index", replace(`"skip":1`, `"skip":2`), record.ErrInvalidAction, "operations[1].skip: 2 is outside 0..index (1)"},
		{"negative index", replace(`"index":0`, `"index":-1`), record.ErrInvalidAction, "operations[0].index: negative (-1)"},
		{"no hash", replace(`"hash":"h0"`, `"hash":""`), record.ErrInvalidAction, "operations[0].hash: missing"},
		{"no skip", replace(`"skip":0,`, ``), record.ErrInvalidAction, "operations[0].skip: missing"},
		{"no timestamp", replace(`"timestampUtcMs":5`, `"timestampUtcMs":null`), record.ErrInvalidAction, "operations[0].action.timestampUtcMs: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := record.ParseJob([]byte(tc.value))
			require.Error(t, err)
			require.Equal(t, tc.typ, record.TypeOf(err), err.Error())
			require.Contains(t, err.Error(), tc.reason)
		})
	}
}
