package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
)

// benchOps makes the operations of one job: n operations of stream k from
// index from, each with a small JSON action like a doclog/json merge patch.
func benchOps(k oplog.StreamKey, job string, from int64, n int) []oplog.Operation {
	out := make([]oplog.Operation, n)
	for i := range out {
		idx := from + int64(i)
		out[i] = oplog.Operation{
			OpID: fmt.Sprintf("%s:%d", job, i), JobID: job, DocumentID: k.DocumentID, DocumentType: "doclog/json",
			Scope: k.Scope, Branch: k.Branch, Index: idx, Version: 1,
			Hash:           "RBNvo1WzZ4oRRq0W9+hknpT7T8If536DEMBg9hyq/4o=",
			TimestampUtcMs: time.Now().UnixMilli(),
			Action: oplog.Action{ID: fmt.Sprintf("%s:a%d", job, i), Type: "MERGE_PATCH", Scope: k.Scope,
				TimestampUtcMs: time.Now().UnixMilli(), Input: json.RawMessage(`{"title":"hello","count":42}`)},
		}
	}
	return out
}

// appendBench appends docs documents × opsPer operations per Append call
// and reports rows/s.
func appendBench(b *testing.B, docs, opsPer int, opts ...postgres.Option) {
	pool := newPool(b, true)
	store := postgres.New(pool, opts...)
	ctx := context.Background()
	keys := make([]oplog.StreamKey, docs)
	revs := make([]int64, docs)
	for i := range keys {
		keys[i] = oplog.StreamKey{DocumentID: fmt.Sprintf("bench-%d", i), Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	}
	for n := 0; b.Loop(); n++ {
		b.StopTimer()
		reqs := make([]oplog.AppendRequest, docs)
		for i, k := range keys {
			job := fmt.Sprintf("job-%d-%d", n, i)
			reqs[i] = oplog.AppendRequest{
				DocumentID: k.DocumentID, DocumentType: "doclog/json",
				Jobs:      []oplog.JobOutcome{{JobID: job, Status: oplog.JobWriteReady}},
				Streams:   []oplog.StreamAppend{{Stream: k, ExpectedRevision: revs[i], Operations: benchOps(k, job, revs[i], opsPer)}},
				Condition: &oplog.AppendCondition{Streams: []oplog.ConditionStream{{Stream: oplog.StreamKey{DocumentID: k.DocumentID, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}}}},
			}
		}
		b.StartTimer()
		res, err := store.Append(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			revs[i] += int64(opsPer)
		}
	}
	b.ReportMetric(float64(b.N*docs*opsPer)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkAppendSingle is (a): one stream, one operation per Append.
func BenchmarkAppendSingle(b *testing.B) { appendBench(b, 1, 1) }

// BenchmarkAppendBatch is (b): 100 documents per Append, 10 operations each,
// as the store writes it by default (the copy path, at 1,000 operations).
func BenchmarkAppendBatch(b *testing.B) { appendBench(b, 100, 10) }

// BenchmarkAppendPath compares the two ways a batch is written at several
// sizes, to place DefaultCopyThreshold: docs documents of one operation
// each (an executor batch in mode single) through the one-round-trip insert
// and through the copy path.
func BenchmarkAppendPath(b *testing.B) {
	for _, docs := range []int{1, 4, 16, 64, 256, 1000} {
		for _, path := range []struct {
			name      string
			threshold int
		}{{"insert", 0}, {"copy", 1}} {
			b.Run(fmt.Sprintf("ops=%d/path=%s", docs, path.name), func(b *testing.B) {
				appendBench(b, docs, 1, postgres.WithCopyThreshold(path.threshold))
			})
		}
	}
}

// BenchmarkCopyBaseline is (c): a raw COPY of the same 1,000 rows per
// iteration into a table created LIKE operations INCLUDING ALL — no guard,
// no lock, no job results: the ceiling the append is measured against.
func BenchmarkCopyBaseline(b *testing.B) {
	pool := newPool(b, true)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE operations_copy (LIKE operations INCLUDING ALL)`)
	require.NoError(b, err)
	cols := []string{"document_id", "scope", "branch", "idx", "skip", "op_id", "job_id", "document_type",
		"model_version", "hash", "ts_utc_ms", "action_id", "action"}
	const docs, opsPer = 100, 10
	revs := make([]int64, docs)
	for n := 0; b.Loop(); n++ {
		b.StopTimer()
		rows := make([][]any, 0, docs*opsPer)
		for i := range docs {
			k := oplog.StreamKey{DocumentID: fmt.Sprintf("bench-%d", i), Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
			for _, op := range benchOps(k, fmt.Sprintf("job-%d-%d", n, i), revs[i], opsPer) {
				action, err := json.Marshal(op.Action)
				require.NoError(b, err)
				rows = append(rows, []any{op.DocumentID, op.Scope, op.Branch, op.Index, op.Skip, op.OpID, op.JobID,
					op.DocumentType, int32(op.Version), op.Hash, op.TimestampUtcMs, op.Action.ID, string(action)})
			}
			revs[i] += opsPer
		}
		b.StartTimer()
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"operations_copy"}, cols, pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*docs*opsPer)/b.Elapsed().Seconds(), "rows/s")
}
