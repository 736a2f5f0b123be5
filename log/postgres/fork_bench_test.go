package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
)

// forkOps is the size of the document BenchmarkFork forks.
const forkOps = 10_000

// BenchmarkFork forks a document of 10,000 operations: "append" as a fork
// job does (read the prefix, append it to the new branch under new
// operation ids with the registry entry, in one request through the log's
// conditional append), "insert-select" as a raw INSERT … SELECT of the
// same rows, the floor any copied prefix has. A fork that shared the
// prefix by reference would write nothing here, and pay on every read of
// the branch instead.
func BenchmarkFork(b *testing.B) {
	pool := newPool(b, true)
	store := postgres.New(pool)
	ctx := context.Background()
	main := oplog.StreamKey{DocumentID: "fork-bench", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	res, err := store.Append(ctx, []oplog.AppendRequest{{
		DocumentID: main.DocumentID, DocumentType: "doclog/json",
		Jobs:    []oplog.JobOutcome{{JobID: "seed", Status: oplog.JobWriteReady}},
		Streams: []oplog.StreamAppend{{Stream: main, Operations: benchOps(main, "seed", 0, forkOps)}},
	}})
	require.NoError(b, err)
	require.NoError(b, res[0].Err)

	// A sub-benchmark's function runs more than once: every fork needs a
	// branch name of its own.
	var forks atomic.Int64
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			branch := fmt.Sprintf("append-%d", forks.Add(1))
			job := "fork-" + branch
			ops, err := store.ReadStream(ctx, main, 0, forkOps)
			if err != nil || len(ops) != forkOps {
				b.Fatalf("read the prefix: %d operations, %v", len(ops), err)
			}
			to := oplog.StreamKey{DocumentID: main.DocumentID, Scope: main.Scope, Branch: branch}
			for i := range ops {
				ops[i].OpID, ops[i].JobID, ops[i].Branch = fmt.Sprintf("%s:%d", job, i), job, branch
			}
			at := map[string]int64{main.Scope: forkOps}
			res, err := store.Append(ctx, []oplog.AppendRequest{{
				DocumentID: main.DocumentID, DocumentType: "doclog/json",
				Jobs:      []oplog.JobOutcome{{JobID: job, Status: oplog.JobWriteReady}},
				Streams:   []oplog.StreamAppend{{Stream: to, Operations: ops}},
				Condition: &oplog.AppendCondition{Streams: []oplog.ConditionStream{{Stream: to}}},
				Branch:    &oplog.BranchRef{DocumentID: main.DocumentID, Branch: branch, Base: main.Branch, ForkPoint: at, BasePoint: at, OwnPoint: at, JobID: job},
			}})
			if err != nil || res[0].Err != nil {
				b.Fatalf("append the fork: %v %v", err, res[0].Err)
			}
		}
		b.ReportMetric(float64(forkOps*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("insert-select", func(b *testing.B) {
		for b.Loop() {
			branch := fmt.Sprintf("raw-%d", forks.Add(1))
			tag, err := pool.Exec(ctx, `INSERT INTO operations (document_id, scope, branch, idx, skip, op_id, job_id,
    document_type, model_version, hash, ts_utc_ms, action_id, action)
SELECT document_id, scope, $2, idx, skip, op_id || ':' || $2, 'fork-' || $2, document_type, model_version, hash,
       ts_utc_ms, action_id, action
FROM operations WHERE document_id = $1 AND scope = $3 AND branch = 'main'`, main.DocumentID, branch, main.Scope)
			if err != nil || tag.RowsAffected() != forkOps {
				b.Fatalf("insert … select: %d rows, %v", tag.RowsAffected(), err)
			}
		}
		b.ReportMetric(float64(forkOps*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}
