package ctlcli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/modeltest"
)

// ctl runs doclogctl with args and returns its exit code and output.
func ctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// migrated returns the URL of a fresh schema migrated through doclogctl.
func migrated(t *testing.T) string {
	url := testenv.PostgresSchema(t)
	code, out, errOut := ctl(t, "migrate", "up", "--database-url", url)
	require.Equal(t, exitOK, code, errOut)
	require.Regexp(t, `applied [1-9]\d* migration\(s\)`, out)
	return url
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	url := testenv.PostgresSchema(t)
	code, out, _ := ctl(t, "migrate", "status", "--database-url", url)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "pending")

	url = migrated(t)
	code, out, _ = ctl(t, "migrate", "status", "--database-url", url, "-o", "json")
	require.Equal(t, exitOK, code)
	var rows []migrationRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.NotEmpty(t, rows)
	for _, r := range rows {
		require.True(t, r.Applied)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Setenv("DOCLOG_DATABASE_URL", "")
	t.Setenv("DATABASE_URL", "")
	code, _, errOut := ctl(t, "migrate", "status")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "no database")

	code, _, errOut = ctl(t, "migrate", "status", "-o", "yaml", "--database-url", "postgres://x")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--output must be table or json")

	code, _, _ = ctl(t, "docs", "get", "--no-such-flag")
	require.Equal(t, exitUsage, code)
}

// storeDoc appends a doclog/json document with n merge patches as one job.
func storeDoc(t *testing.T, url string, n int) *modeltest.Doc {
	ctx := context.Background()
	store, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	defer store.Close()
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	d := modeltest.Created(t, reg, "doclog/json")
	d.JobID = "0193a000-0000-7000-8000-0000000000aa"
	for i := range n {
		d.Must(oplog.ScopeGlobal, "MERGE_PATCH", map[string]any{"n": i})
	}
	req := oplog.AppendRequest{DocumentID: d.ID, DocumentType: d.Type,
		Jobs: []oplog.JobOutcome{{JobID: d.JobID, Status: oplog.JobWriteReady}}}
	for _, scope := range []string{oplog.ScopeDocument, oplog.ScopeGlobal} {
		ops := d.Ops[scope]
		for i := range ops {
			ops[i].JobID = d.JobID
		}
		req.Streams = append(req.Streams, oplog.StreamAppend{Stream: d.Stream(scope).Stream, Operations: ops})
	}
	res, err := store.Append(ctx, []oplog.AppendRequest{req})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	return d
}

func TestDocsAndJobs(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	d := storeDoc(t, url, 12)
	db := []string{"--database-url", url}

	code, out, errOut := ctl(t, append([]string{"docs", "get", d.ID, "-o", "json"}, db...)...)
	require.Equal(t, exitOK, code, errOut)
	var doc struct {
		DocumentType string `json:"documentType"`
		Scopes       map[string]struct {
			Revision int64           `json:"revision"`
			Hash     string          `json:"hash"`
			State    json.RawMessage `json:"state"`
		} `json:"scopes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Equal(t, "doclog/json", doc.DocumentType)
	require.Equal(t, int64(12), doc.Scopes[oplog.ScopeGlobal].Revision)
	require.Equal(t, d.Stream(oplog.ScopeGlobal).Hash, doc.Scopes[oplog.ScopeGlobal].Hash)
	require.JSONEq(t, `{"n":11}`, string(doc.Scopes[oplog.ScopeGlobal].State))

	code, out, _ = ctl(t, append([]string{"docs", "ops", d.ID, "--since", "10"}, db...)...)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "MERGE_PATCH")
	require.Equal(t, 2, strings.Count(out, "MERGE_PATCH"), "indexes 10 and 11")

	code, out, _ = ctl(t, append([]string{"docs", "get", "missing"}, db...)...)
	require.Equal(t, exitFailed, code)

	// A UUIDv7 of now without a result may still get one: PENDING, as
	// GET /v1/jobs/{id} answers it.
	pending := uuid.Must(uuid.NewV7()).String()
	code, out, errOut = ctl(t, append([]string{"jobs", "get", d.JobID, pending, "-o", "json"}, db...)...)
	require.Equal(t, exitOK, code, errOut)
	var jobs []jobStatus
	require.NoError(t, json.Unmarshal([]byte(out), &jobs))
	require.Len(t, jobs, 2)
	require.Equal(t, oplog.JobWriteReady, jobs[0].Status)
	require.Equal(t, oplog.JobPending, jobs[1].Status)
	require.Empty(t, jobs[1].ConsistencyToken)
	// The token is the read store's wire form of the coordinates beside it.
	require.Len(t, *jobs[0].Coordinates, 2)
	token, err := oplog.DecodeToken(jobs[0].ConsistencyToken)
	require.NoError(t, err)
	require.Equal(t, *jobs[0].Coordinates, token.Coordinates)
	code, out, _ = ctl(t, append([]string{"jobs", "get", d.JobID}, db...)...)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, jobs[0].ConsistencyToken, "the table shows the token to copy")
}

func TestDocsValidateReportsCorruptedKeyframe(t *testing.T) {
	t.Parallel()
	url := migrated(t)
	d := storeDoc(t, url, 25)
	db := []string{"--database-url", url}

	code, out, errOut := ctl(t, append([]string{"docs", "rebuild-keyframes", d.ID, "-o", "json"}, db...)...)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `"written": 2`)
	code, out, _ = ctl(t, append([]string{"docs", "validate", d.ID, "--docview=false"}, db...)...)
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "consistent")

	// Corrupt the keyframe at index 19: a state that is not the stream's.
	ctx := context.Background()
	store, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	defer store.Close()
	global := d.Stream(oplog.ScopeGlobal).Stream
	wrong := map[string]any{"n": -1.0}
	h, _, err := model.Hash(wrong)
	require.NoError(t, err)
	require.NoError(t, store.PutKeyframe(ctx, oplog.Keyframe{Stream: global, DocumentType: d.Type, Index: 19, Version: 1, State: json.RawMessage(`{"n":-1}`), Hash: h}))

	code, out, _ = ctl(t, append([]string{"docs", "validate", d.ID, "--docview=false"}, db...)...)
	require.Equal(t, exitProblems, code, "an inconsistent document exits 3")
	require.Contains(t, out, "keyframe")
	require.Contains(t, out, "1 issue(s)")

	code, _, _ = ctl(t, append([]string{"docs", "rebuild-keyframes", d.ID}, db...)...)
	require.Equal(t, exitOK, code)
	code, _, _ = ctl(t, append([]string{"docs", "validate", d.ID, "--docview=false"}, db...)...)
	require.Equal(t, exitOK, code)
}

func TestTopics(t *testing.T) {
	t.Parallel()
	env := testenv.Kafka(t)
	args := []string{"--kafka-seeds", strings.Join(env.Config.Seeds, ","), "--topics-prefix", env.Topics.Prefix}

	code, out, errOut := ctl(t, append([]string{"topics", "create", "--partitions", "3", "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, 3, strings.Count(out, `"created": true`))

	code, out, _ = ctl(t, append([]string{"topics", "create", "--partitions", "3", "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code, "creating again is harmless")
	require.Equal(t, 3, strings.Count(out, `"created": false`))

	code, _, errOut = ctl(t, append([]string{"topics", "create", "--partitions", "5"}, args...)...)
	require.Equal(t, exitFailed, code, "a partition mismatch is refused")
	require.Contains(t, errOut, "partition")

	code, out, _ = ctl(t, append([]string{"topics", "describe", "-o", "json"}, args...)...)
	require.Equal(t, exitOK, code)
	var rows []struct {
		Topic      string `json:"topic"`
		Exists     bool   `json:"exists"`
		Partitions int    `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 3)
	require.True(t, rows[0].Exists)
	require.Equal(t, 3, rows[0].Partitions)
	require.Equal(t, env.Names.Jobs, rows[0].Topic)
}
