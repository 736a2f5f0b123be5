package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
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

// TestConformance runs the log's conformance suite against both ways a
// batch is written: the one-round-trip guarded insert and the copy path
// (copy.go), each forced for every batch, while other work keeps the
// cluster busy (clusterLoad).
func TestConformance(t *testing.T) {
	t.Parallel()
	clusterLoad(t, nil)
	for _, c := range []struct {
		name      string
		threshold int
	}{{"insert", 0}, {"copy", 1}} {
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

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	pool := newPool(t, false)
	ctx := context.Background()
	first, err := postgres.Migrate(ctx, pool)
	require.NoError(t, err)
	all, err := postgres.Migrations()
	require.NoError(t, err)
	require.Len(t, first, len(all))
	second, err := postgres.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, second, "a second run applies nothing")
	requireSingleVersion(t, pool, all)
}

// envMigrateHelper makes the test binary, re-run as a child process, migrate
// the schema at that URL and print how many migrations it applied.
const envMigrateHelper = "DOCLOG_TEST_MIGRATE_URL"

func TestMigrateHelperProcess(t *testing.T) {
	url := os.Getenv(envMigrateHelper)
	if url == "" {
		return // only meaningful as the child of TestMigrateConcurrently
	}
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	applied, err := postgres.Migrate(context.Background(), pool)
	require.NoError(t, err)
	fmt.Printf("applied=%d\n", len(applied))
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := testenv.PostgresSchema(t)
	all, err := postgres.Migrations()
	require.NoError(t, err)
	// Real processes: the test binary re-run as children.
	const procs = 4
	outs := make([][]byte, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMigrateHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), envMigrateHelper+"="+url)
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	total := 0
	for i := range procs {
		require.NoError(t, errs[i], "child %d: %s", i, outs[i])
		m := regexp.MustCompile(`applied=(\d+)`).FindSubmatch(outs[i])
		require.NotNil(t, m, "child %d printed no count: %s", i, outs[i])
		n, err := strconv.Atoi(string(m[1]))
		require.NoError(t, err)
		total += n
	}
	require.Equal(t, len(all), total, "each migration is applied by exactly one process")

	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	defer pool.Close()
	requireSingleVersion(t, pool, all)
}

func requireSingleVersion(t *testing.T, pool *pgxpool.Pool, all []postgres.Migration) {
	t.Helper()
	statuses, err := postgres.MigrationStatuses(context.Background(), pool)
	require.NoError(t, err)
	require.Len(t, statuses, len(all))
	for _, st := range statuses {
		require.True(t, st.Applied(), "migration %d applied", st.Version)
	}
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM doclog_migrations`).Scan(&n))
	require.Equal(t, len(all), n, "one row per migration")
}

func TestMigrationStatusBeforeMigrate(t *testing.T) {
	t.Parallel()
	pool := newPool(t, false)
	statuses, err := postgres.MigrationStatuses(context.Background(), pool)
	require.NoError(t, err)
	require.NotEmpty(t, statuses)
	for _, st := range statuses {
		require.False(t, st.Applied())
	}
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
