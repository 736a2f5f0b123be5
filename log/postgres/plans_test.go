package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
)

// TestPlansSurviveGrowth holds the append's statements to index plans on
// tables that grew after their plans were cached. A new installation
// analyzes its tables while they hold a few rows; a generic plan made then
// (each connection keeps one per statement until the next analyze) was a
// sequential scan of jobs, comparing every row with every job id of a
// batch, and a benchmark's fresh schema spent whole runs in it.
func TestPlansSurviveGrowth(t *testing.T) {
	t.Parallel()
	for _, tc := range writePaths {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg, err := pgxpool.ParseConfig(testenv.PostgresSchema(t))
			require.NoError(t, err)
			cfg.MaxConns = 1 // every statement prepared on the one connection inspected below
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			_, err = postgres.Migrate(ctx, pool)
			require.NoError(t, err)
			store := postgres.New(pool, postgres.WithCopyThreshold(tc.threshold))

			k := oplog.StreamKey{DocumentID: "doc", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
			rev := int64(0)
			appendOne := func() {
				job := fmt.Sprintf("job-%d", rev)
				res, err := store.Append(ctx, []oplog.AppendRequest{{
					DocumentID: k.DocumentID, DocumentType: "doclog/json",
					Jobs:      []oplog.JobOutcome{{JobID: job, Status: oplog.JobWriteReady}},
					Streams:   []oplog.StreamAppend{{Stream: k, ExpectedRevision: rev, Operations: benchOps(k, job, rev, 1)}},
					Condition: &oplog.AppendCondition{Streams: []oplog.ConditionStream{{Stream: oplog.StreamKey{DocumentID: k.DocumentID, Scope: oplog.ScopeDocument, Branch: oplog.DefaultBranch}}}},
				}})
				require.NoError(t, err)
				require.NoError(t, res[0].Err)
				rev++
			}
			// Small tables, analyzed: the planner's best plan for them is a
			// sequential scan. More than five calls, so that a statement
			// left to plan_cache_mode=auto would settle on a generic plan.
			for range 3 {
				appendOne()
			}
			_, err = pool.Exec(ctx, `ANALYZE jobs; ANALYZE operations`)
			require.NoError(t, err)
			for range 8 {
				appendOne()
			}
			// The tables grow a hundredfold with no analyze in between.
			_, err = pool.Exec(ctx, `INSERT INTO jobs (job_id, document_id, status, streams, token, error_history)
SELECT 'bulk-' || g, 'bulk-' || (g % 100), 'WRITE_READY', '[]', '{}', '[]' FROM generate_series(1, 20000) AS g`)
			require.NoError(t, err)
			appendOne()

			// Every statement the connection prepared for the append, as
			// the append's transaction would run it now.
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			rows, err := conn.Query(ctx, `SELECT name, statement, cardinality(parameter_types) FROM pg_prepared_statements
WHERE statement ~ '\m(jobs|operations)\M'`)
			require.NoError(t, err)
			type stmt struct {
				name, text string
				params     int
			}
			var stmts []stmt
			for rows.Next() {
				var s stmt
				require.NoError(t, rows.Scan(&s.name, &s.text, &s.params))
				// pgx's CopyFrom prepares a select of the table's columns to
				// learn their types, and never runs it.
				if !strings.HasPrefix(s.text, `select "`) {
					stmts = append(stmts, s)
				}
			}
			require.NoError(t, rows.Err())
			require.NotEmpty(t, stmts)
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, postgres.HotPathSQL)
			require.NoError(t, err)
			for _, s := range stmts {
				call := s.name
				if s.params > 0 {
					call += "(" + strings.TrimSuffix(strings.Repeat("NULL,", s.params), ",") + ")"
				}
				text := explain(ctx, t, tx, "EXECUTE "+call)
				require.NotRegexp(t, `Seq Scan on (jobs|operations)\b`, text, "%s\n%s", s.text, text)
			}
		})
	}
}

// explain returns the plan of query as tx would run it now.
func explain(ctx context.Context, t *testing.T, tx pgx.Tx, query string, args ...any) string {
	t.Helper()
	plan, err := tx.Query(ctx, "EXPLAIN "+query, args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(plan, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}
