package executor_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/ingest"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/jsondoc"
)

// Jobs submitted through the HTTP API end WRITE_READY: the document is
// created with its name, patched, and deleted; the operations are in the log
// with contiguous indexes and the write-ready records carry them.
func TestSubmitThroughHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	wr := b.reader(b.kenv.Names.WriteReady)
	b.start(b.config())
	h, err := ingest.NewHandler(ingest.Config{JobsTopic: b.kenv.Names.Jobs, BearerTokens: []string{"secret"}},
		ingest.Deps{Producer: b.producer, Results: b.store, Registry: b.reg})
	require.NoError(t, err)
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	call := func(method, path string, body any) map[string]any {
		t.Helper()
		var rd io.Reader
		if body != nil {
			raw, err := json.Marshal(body)
			require.NoError(t, err)
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequest(method, srv.URL+path, rd)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer secret")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out := map[string]any{}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Less(t, resp.StatusCode, 300, "%s %s: %v", method, path, out)
		return out
	}
	created := call("POST", "/v1/documents", map[string]any{"documentId": "doc-http", "documentType": jsondoc.DocumentType, "name": "Over HTTP"})
	patched := call("POST", "/v1/jobs", map[string]any{"documentId": "doc-http", "documentType": jsondoc.DocumentType,
		"actions": []any{map[string]any{"type": jsondoc.ActionMergePatch, "scope": oplog.ScopeGlobal, "input": map[string]any{"a": 1}}}})
	deleted := call("DELETE", "/v1/documents/doc-http?documentType="+jsondoc.DocumentType, nil)
	var jobIDs []string
	for _, r := range []map[string]any{created, patched, deleted} {
		jobIDs = append(jobIDs, r["jobId"].(string))
	}
	for _, id := range jobIDs {
		st := call("GET", "/v1/jobs/"+id+"?wait=20s", nil)
		require.Equal(t, string(oplog.JobWriteReady), st["status"], "job %s: %v", id, st)
	}

	doc := b.readAll(oplog.StreamKey{DocumentID: "doc-http", Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch})
	require.Len(t, doc, 3, "CREATE_DOCUMENT, SET_NAME, DELETE_DOCUMENT")
	for i, typ := range []string{model.ActionCreateDocument, model.ActionSetName, model.ActionDeleteDocument} {
		require.EqualValues(t, i, doc[i].Index)
		require.Equal(t, typ, doc[i].Action.Type)
	}
	st, err := b.reg.ReplayStream(doc[0].Stream(), "", doc)
	require.NoError(t, err)
	info, ok := model.DocumentInfoOf(st)
	require.True(t, ok)
	require.Equal(t, "Over HTTP", info.Name)
	require.True(t, info.IsDeleted)
	global := b.readAll(oplog.StreamKey{DocumentID: "doc-http", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch})
	require.Len(t, global, 1)
	require.Equal(t, jobIDs[1], global[0].JobID)

	byJob := b.writeReadies(wr, jobIDs, 30*time.Second)
	require.Len(t, byJob[jobIDs[0]][0].Operations, 2, "the create job wrote CREATE_DOCUMENT and SET_NAME")
	require.Equal(t, global[0].Hash, byJob[jobIDs[1]][0].Operations[0].Hash)
	require.Equal(t, model.ActionDeleteDocument, byJob[jobIDs[2]][0].Operations[0].Action.Type)
}
