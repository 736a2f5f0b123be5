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
