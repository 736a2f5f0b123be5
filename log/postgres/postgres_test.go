package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/logtest"
	"github.com/doclog/doclog/log/postgres"
)

// newPool opens a pool on a fresh schema, migrated when migrate is set.
func newPool(t testing.TB, migrate bool) *pgxpool.Pool {
	t.Helper()
	url := testenv.PostgresSchema(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 12
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	if migrate {
		_, err := postgres.Migrate(ctx, pool)
		require.NoError(t, err)
	}
	return pool
}

// writePaths are the two ways a batch is written, each forced for every
// batch by its copy threshold: the one-round-trip guarded insert and the
// copy path (copy.go).
var writePaths = []struct {
	name      string
	threshold int
}{{"insert", 0}, {"copy", 1}}

// TestConformance runs the log's conformance suite against both ways a
// batch is written: the one-round-trip guarded insert and the copy path
// (copy.go), each forced for every batch, while other work keeps the
// cluster busy (clusterLoad).
func TestConformance(t *testing.T) {
	t.Parallel()
	clusterLoad(t, nil)
	for _, c := range writePaths {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			logtest.Run(t, logtest.Harness{
				NewStore: func(t *testing.T) oplog.Store {
					return postgres.New(newPool(t, true), postgres.WithCopyThreshold(c.threshold))
				},
				HoldTransaction: holdTransaction,
			})
		})
	}
}

// holdModes are the ways holdTransaction opens the transaction before its
// row: a transaction's id is assigned by its first write of any kind, which
// can come well before its row of the log, and a row written under a
// savepoint carries a subtransaction's id as its xmin beside the top-level
// id in txid.
var holdModes = []string{
	"",
	`SELECT pg_current_xact_id()`,
	`CREATE TEMP TABLE hold_scratch (n int) ON COMMIT DROP; INSERT INTO hold_scratch VALUES (1)`,
	`SAVEPOINT before_row`,
	`SAVEPOINT undone; CREATE TEMP TABLE hold_undone (n int); ROLLBACK TO SAVEPOINT undone; SAVEPOINT before_row`,
}

var holdCalls atomic.Int64

// holdTransaction writes op in a transaction left open until commit is
// called, opening it each time in the next of holdModes.
func holdTransaction(t *testing.T, s oplog.Store, op oplog.Operation) func() {
	pool := s.(*postgres.Store).Pool()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	mode := holdModes[holdCalls.Add(1)%int64(len(holdModes))]
	if mode != "" {
		_, err = tx.Exec(ctx, mode)
		require.NoError(t, err)
	}
	action, err := json.Marshal(op.Action)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO operations (document_id, scope, branch, idx, skip, op_id, job_id,
	document_type, model_version, hash, ts_utc_ms, action_id, action) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13::text::json)`,
		op.DocumentID, op.Scope, op.Branch, op.Index, op.Skip, op.OpID, op.JobID, op.DocumentType, op.Version,
		op.Hash, op.TimestampUtcMs, op.Action.ID, string(action))
	require.NoError(t, err)
	if strings.HasSuffix(mode, "before_row") {
		_, err = tx.Exec(ctx, `RELEASE SAVEPOINT before_row`)
		require.NoError(t, err)
	}
	var once sync.Once
	commit := func() { once.Do(func() { require.NoError(t, tx.Commit(ctx)) }) }
	t.Cleanup(commit)
	return commit
}

func TestDeleteJobResultsBefore(t *testing.T) {
	t.Parallel()
	pool := newPool(t, true)
	store := postgres.New(pool)
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("job-retention-%d", i)
		ids = append(ids, id)
		res, err := store.Append(ctx, []oplog.AppendRequest{{
			DocumentID: fmt.Sprintf("doc-retention-%d", i),
			Jobs:       []oplog.JobOutcome{{JobID: id, Status: oplog.JobFailed, ErrorHistory: []oplog.ErrorInfo{{Name: "X", Message: "y"}}}},
		}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	_, err := pool.Exec(ctx, `UPDATE jobs SET created_at = now() - interval '40 days' WHERE job_id = ANY($1)`, ids[:2])
	require.NoError(t, err)
	n, err := store.DeleteJobResultsBefore(ctx, time.Now().Add(-30*24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	left, err := store.JobResults(ctx, ids)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Contains(t, left, ids[2])
}

func TestUnavailableIsTyped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Nothing listens on port 1: every call fails to connect.
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	require.NoError(t, err)
	defer pool.Close()
	down := postgres.New(pool)
	k := oplog.StreamKey{DocumentID: "d", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	_, err = down.ReadStream(ctx, k, 0, 0)
	require.True(t, oplog.IsUnavailable(err), "a refused connection is unavailability: %v", err)
	_, err = down.Append(ctx, []oplog.AppendRequest{{DocumentID: "d", Jobs: []oplog.JobOutcome{{JobID: "j", Status: oplog.JobFailed}}}})
	require.True(t, oplog.IsUnavailable(err), "%v", err)
	require.True(t, oplog.IsUnavailable(down.Ping(ctx)))

	// A statement the database refuses is not.
	up := postgres.New(newPool(t, true))
	err = up.PutKeyframe(ctx, oplog.Keyframe{Stream: k, Index: 0, State: []byte("{not json"), Hash: "h", DocumentType: "x"})
	require.Error(t, err)
	require.False(t, oplog.IsUnavailable(err), "%v", err)
	_, err = up.Tail(ctx, "garbage", 1)
	require.Error(t, err)
	require.False(t, oplog.IsUnavailable(err))
}
