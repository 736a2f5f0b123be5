package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
)

// JobIDs pages every stored job id in order, and OldestJobResult names the
// oldest result kept.
func TestJobIDsAndOldestJobResult(t *testing.T) {
	t.Parallel()
	pool := newPool(t, true)
	store := postgres.New(pool)
	ctx := context.Background()
	oldest, err := store.OldestJobResult(ctx)
	require.NoError(t, err)
	require.True(t, oldest.IsZero(), "no result yet")

	var want []string
	for i := range 5 {
		id := fmt.Sprintf("job-page-%d", i)
		want = append(want, id)
		res, err := store.Append(ctx, []oplog.AppendRequest{{
			DocumentID: fmt.Sprintf("doc-page-%d", i),
			Jobs:       []oplog.JobOutcome{{JobID: id, Status: oplog.JobFailed, ErrorHistory: []oplog.ErrorInfo{{Name: "X", Message: "y"}}}},
		}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	var got []string
	for after := ""; ; {
		page, err := store.JobIDs(ctx, after, 2)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 2)
		got = append(got, page...)
		after = page[len(page)-1]
	}
	require.Equal(t, want, got)

	past := time.Now().Add(-48 * time.Hour).UTC().Truncate(time.Second)
	_, err = pool.Exec(ctx, `UPDATE jobs SET created_at = $1 WHERE job_id = $2`, past, want[3])
	require.NoError(t, err)
	oldest, err = store.OldestJobResult(ctx)
	require.NoError(t, err)
	require.True(t, past.Equal(oldest), "oldest %s, want %s", oldest, past)
}

// A load job's summary is stored with its result and read back as it was
// given, on both ways a batch is written; a failed job and an ordinary one
// read back none, and a failed job cannot carry one.
func TestLoadSummaryRoundTrips(t *testing.T) {
	t.Parallel()
	for _, c := range writePaths {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			store := postgres.New(newPool(t, true), postgres.WithCopyThreshold(c.threshold))
			ctx := context.Background()
			const doc = "doc-load-summary"
			global := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
			local := oplog.StreamKey{DocumentID: doc, Scope: oplog.ScopeLocal, Branch: oplog.DefaultBranch}
			op := oplog.Operation{OpID: "op-load-1", JobID: "job-load", DocumentID: doc, DocumentType: "doclog/json",
				Scope: global.Scope, Branch: global.Branch, Index: 0, Hash: "h", TimestampUtcMs: 10, Version: 1,
				Action: oplog.Action{ID: "act-load-1", Type: "MERGE_PATCH", Scope: global.Scope, TimestampUtcMs: 10, Input: []byte(`{}`)}}
			load := &oplog.LoadSummary{Streams: []oplog.LoadStream{
				{Stream: global, Stored: 1, Replayed: 2, Superseded: 3, Reshuffled: 4, Skip: 5},
				{Stream: local, Replayed: 7},
			}}
			res, err := store.Append(ctx, []oplog.AppendRequest{{
				DocumentID: doc, DocumentType: "doclog/json",
				Jobs:    []oplog.JobOutcome{{JobID: "job-load", Status: oplog.JobWriteReady, Load: load}},
				Streams: []oplog.StreamAppend{{Stream: global, Operations: []oplog.Operation{op}}, {Stream: local}},
			}, {
				DocumentID: "doc-load-failed",
				Jobs:       []oplog.JobOutcome{{JobID: "job-load-failed", Status: oplog.JobFailed, ErrorHistory: []oplog.ErrorInfo{{Name: "X", Message: "y"}}}},
			}})
			require.NoError(t, err)
			require.NoError(t, res[0].Err)
			require.NoError(t, res[1].Err)
			require.Equal(t, load, res[0].Jobs[0].Load, "the append's result carries it")

			got, err := store.JobResults(ctx, []string{"job-load", "job-load-failed"})
			require.NoError(t, err)
			require.Equal(t, load, got["job-load"].Load)
			require.Equal(t, []oplog.Coordinate{{DocumentID: doc, Scope: global.Scope, Branch: global.Branch, Index: 0}},
				got["job-load"].Token.Coordinates, "the token beside it is unchanged")
			require.Nil(t, got["job-load-failed"].Load)

			res, err = store.Append(ctx, []oplog.AppendRequest{{
				DocumentID: "doc-load-refused",
				Jobs: []oplog.JobOutcome{{JobID: "job-load-refused", Status: oplog.JobFailed, Load: load,
					ErrorHistory: []oplog.ErrorInfo{{Name: "X", Message: "y"}}}},
			}})
			require.NoError(t, err)
			var invalid *oplog.InvalidRequest
			require.ErrorAs(t, res[0].Err, &invalid, "a failed job with a load summary")
		})
	}
}
