package pgproj_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/pgproj"
)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, testenv.PostgresSchema(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// assignedStore is a runner store over a fresh migrated schema, its pool
// configured by configure, with partition 0 of projector "p" assigned.
func assignedStore(t *testing.T, configure func(*pgxpool.Config)) (*pgxpool.Pool, *pgproj.Store) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresSchema(t))
	require.NoError(t, err)
	configure(cfg)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pgmigrate.Migrate(t.Context(), pool, pgproj.RunnerMigrations())
	require.NoError(t, err)
	store := pgproj.New(pool)
	_, err = store.Assign(t.Context(), "p", 0)
	require.NoError(t, err)
	return pool, store
}

// newStore is a runner store over a fresh migrated schema.
func newStore(t *testing.T) *pgproj.Store {
	t.Helper()
	pool := newPool(t)
	_, err := pgmigrate.Migrate(t.Context(), pool, pgproj.RunnerMigrations())
	require.NoError(t, err)
	return pgproj.New(pool)
}

func TestFenceAndHeads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)

	// No assignment yet: any epoch is stale.
	err := s.InTx(ctx, []projectors.Fence{{Projector: "p", Partition: 0, Epoch: 1, NextOffset: 5}}, func(projectors.Tx) error { return nil })
	var fe *projectors.FencedError
	require.ErrorAs(t, err, &fe)

	cp, err := s.Assign(ctx, "p", 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), cp.Epoch)
	require.Equal(t, int64(-1), cp.NextOffset)
	k := oplog.StreamKey{DocumentID: "d", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	head := func(i int64) projectors.Head {
		return projectors.Head{Stream: k, DocumentType: "t", LastIndex: i, Hash: "h", Version: 1, State: json.RawMessage(`{}`)}
	}
	err = s.InTx(ctx, []projectors.Fence{{Projector: "p", Partition: 0, Epoch: 1, NextOffset: 5}}, func(tx projectors.Tx) error {
		n, err := tx.PutHeadsIfNewer(ctx, "p", []projectors.Head{head(3)})
		require.Equal(t, 1, n)
		return err
	})
	require.NoError(t, err)

	// A newer owner: the old epoch writes nothing, not even heads.
	cp, err = s.Assign(ctx, "p", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), cp.Epoch)
	require.Equal(t, int64(5), cp.NextOffset)
	// The fence check shares the round trip of the batch's first
	// statement, which it refuses; a batch that queues its writes is
	// refused at its commit.
	err = s.InTx(ctx, []projectors.Fence{{Projector: "p", Partition: 0, Epoch: 1, NextOffset: 9}}, func(tx projectors.Tx) error {
		_, err := tx.PutHeadsIfNewer(ctx, "p", []projectors.Head{head(7)})
		require.ErrorAs(t, err, &fe, "the first statement of a stale batch is refused")
		return err
	})
	require.ErrorAs(t, err, &fe)
	require.Equal(t, int64(2), fe.Current)
	require.Equal(t, int64(1), fe.Epoch)
	err = s.InTx(ctx, []projectors.Fence{{Projector: "p", Partition: 0, Epoch: 1, NextOffset: 9}}, func(tx projectors.Tx) error {
		tx.QueueHeadsIfNewer("p", []projectors.Head{head(8)})
		return nil
	})
	require.ErrorAs(t, err, &fe)
	require.Equal(t, int64(2), fe.Current)
	last, err := s.LastIndexes(ctx, "p", []string{"d"})
	require.NoError(t, err)
	require.Equal(t, map[oplog.StreamKey]int64{k: 3}, last, "a stale batch wrote a head")
	cp, err = s.Assign(ctx, "p", 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), cp.NextOffset, "a stale batch moved the checkpoint")

	// Heads only move forward.
	require.NoError(t, s.InTx(ctx, nil, func(tx projectors.Tx) error {
		n, err := tx.PutHeadsIfNewer(ctx, "p", []projectors.Head{head(2)})
		require.Zero(t, n)
		return err
	}))
	last, err = s.LastIndexes(ctx, "p", []string{"d"})
	require.NoError(t, err)
	require.Equal(t, map[oplog.StreamKey]int64{k: 3}, last)

	// Quarantine, list, release.
	require.NoError(t, s.InTx(ctx, nil, func(tx projectors.Tx) error {
		return tx.Quarantine(ctx, "p", projectors.Quarantine{Stream: k, Index: 4, ErrorName: "HashMismatch", Reason: "test"})
	}))
	qs, err := s.Quarantines(ctx, "p")
	require.NoError(t, err)
	require.Len(t, qs, 1)
	released, err := s.Release(ctx, "p", k)
	require.NoError(t, err)
	require.True(t, released)
	qs, err = s.Quarantines(ctx, "p")
	require.NoError(t, err)
	require.Empty(t, qs)
}

// One transaction fences and checkpoints several partitions: all move
// together, one stale epoch refuses the whole batch (naming that
// partition) with nothing written, and fences must name one projector and
// distinct partitions.
func TestFenceSeveralPartitions(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := t.Context()
	_, err := pgmigrate.Migrate(ctx, pool, pgproj.RunnerMigrations())
	require.NoError(t, err)
	s := pgproj.New(pool)
	for _, p := range []int32{0, 1, 2} {
		_, err := s.Assign(ctx, "p", p)
		require.NoError(t, err)
	}
	k := oplog.StreamKey{DocumentID: "d", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	put := func(tx projectors.Tx) error {
		_, err := tx.PutHeadsIfNewer(ctx, "p", []projectors.Head{{Stream: k, DocumentType: "t", LastIndex: 0, Hash: "h", Version: 1, State: json.RawMessage(`{}`)}})
		return err
	}
	fences := func(offsets ...int64) []projectors.Fence {
		var out []projectors.Fence
		for i, o := range offsets {
			out = append(out, projectors.Fence{Projector: "p", Partition: int32(2 - i), Epoch: 1, NextOffset: o})
		}
		return out
	}
	positions := func() map[int32]int64 {
		cps, err := s.Checkpoints(ctx, "p")
		require.NoError(t, err)
		out := map[int32]int64{}
		for _, cp := range cps {
			out[cp.Partition] = cp.NextOffset
		}
		return out
	}

	require.NoError(t, s.InTx(ctx, fences(30, 20, 10), put))
	require.Equal(t, map[int32]int64{0: 10, 1: 20, 2: 30}, positions())

	// Partition 1 moves: a batch over all three is refused whole.
	_, err = s.Assign(ctx, "p", 1)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM projector_streams`)
	require.NoError(t, err)
	err = s.InTx(ctx, fences(31, 21, 11), put)
	var fe *projectors.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, projectors.FencedError{Projector: "p", Partition: 1, Epoch: 1, Current: 2}, *fe)
	require.Equal(t, map[int32]int64{0: 10, 1: 20, 2: 30}, positions())
	last, err := s.LastIndexes(ctx, "p", []string{"d"})
	require.NoError(t, err)
	require.Empty(t, last, "a refused batch wrote a head")

	// A partition never assigned is stale too.
	err = s.InTx(ctx, []projectors.Fence{{Projector: "p", Partition: 7, Epoch: 1}}, put)
	require.ErrorAs(t, err, &fe)
	require.Equal(t, int64(-1), fe.Current)

	err = s.InTx(ctx, []projectors.Fence{{Projector: "p", Partition: 0, Epoch: 1}, {Projector: "q", Partition: 1, Epoch: 1}}, put)
	require.ErrorContains(t, err, "a batch belongs to one projector")
	err = s.InTx(ctx, []projectors.Fence{{Projector: "p", Partition: 0, Epoch: 1}, {Projector: "p", Partition: 0, Epoch: 1}}, put)
	require.ErrorContains(t, err, "partition 0 is fenced twice")
	require.Equal(t, map[int32]int64{0: 10, 1: 20, 2: 30}, positions())
}

// Writes queued in a batch go with its commit, in order, after what the
// batch ran itself; one that fails rolls the whole batch back, checkpoint
// included, and says what it was doing.
// queuedTable is a runner store over a fresh schema with a table queued
// (n int PRIMARY KEY, v text) for writes to go to, and partition 0 of
// projector p assigned.
func queuedTable(t *testing.T) (*pgxpool.Pool, *pgproj.Store, projectors.Checkpoint) {
	t.Helper()
	pool := newPool(t)
	ctx := t.Context()
	_, err := pgmigrate.Migrate(ctx, pool, pgproj.RunnerMigrations())
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE queued (n int PRIMARY KEY, v text NOT NULL)`)
	require.NoError(t, err)
	s := pgproj.New(pool)
	cp, err := s.Assign(ctx, "p", 0)
	require.NoError(t, err)
	return pool, s, cp
}

func TestQueuedWritesGoWithTheCommit(t *testing.T) {
	t.Parallel()
	pool, s, cp := queuedTable(t)
	ctx := t.Context()
	k := oplog.StreamKey{DocumentID: "d", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	rows := func() []string {
		var out []string
		r, err := pool.Query(ctx, `SELECT n || '=' || v FROM queued ORDER BY n`)
		require.NoError(t, err)
		for r.Next() {
			var x string
			require.NoError(t, r.Scan(&x))
			out = append(out, x)
		}
		require.NoError(t, r.Err())
		return out
	}

	fence := []projectors.Fence{{Projector: "p", Partition: 0, Epoch: cp.Epoch, NextOffset: 7}}
	require.NoError(t, s.InTx(ctx, fence, func(tx projectors.Tx) error {
		require.NoError(t, pgproj.Queue(tx, "insert 1", `INSERT INTO queued VALUES (1, 'queued')`))
		require.NoError(t, pgproj.Queue(tx, "update 1", `UPDATE queued SET v = v || ' then updated' WHERE n = $1`, 1))
		tx.QueueHeadsIfNewer("p", []projectors.Head{{Stream: k, DocumentType: "t", LastIndex: 4, Hash: "h", Version: 1, State: json.RawMessage(`{}`)}})
		q, err := pgproj.Conn(tx)
		require.NoError(t, err)
		// Nothing queued has run yet.
		var n int
		require.NoError(t, q.QueryRow(ctx, `SELECT count(*) FROM queued`).Scan(&n))
		require.Zero(t, n)
		_, err = q.Exec(ctx, `INSERT INTO queued VALUES (2, 'at once')`)
		return err
	}))
	require.Equal(t, []string{"1=queued then updated", "2=at once"}, rows())
	last, err := s.LastIndexes(ctx, "p", []string{"d"})
	require.NoError(t, err)
	require.Equal(t, map[oplog.StreamKey]int64{k: 4}, last)

	fence[0].NextOffset = 9
	err = s.InTx(ctx, fence, func(tx projectors.Tx) error {
		q, err := pgproj.Conn(tx)
		require.NoError(t, err)
		_, err = q.Exec(ctx, `INSERT INTO queued VALUES (3, 'at once')`)
		require.NoError(t, err)
		tx.QueueHeadsIfNewer("p", []projectors.Head{{Stream: k, DocumentType: "t", LastIndex: 5, Hash: "h", Version: 1, State: json.RawMessage(`{}`)}})
		return pgproj.Queue(tx, "insert the first row again", `INSERT INTO queued VALUES (1, 'duplicate')`)
	})
	require.ErrorContains(t, err, "insert the first row again: ")
	require.Equal(t, []string{"1=queued then updated", "2=at once"}, rows(), "a failed queued write rolls the batch back")
	last, err = s.LastIndexes(ctx, "p", []string{"d"})
	require.NoError(t, err)
	require.Equal(t, map[oplog.StreamKey]int64{k: 4}, last)
	cps, err := s.Checkpoints(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(7), cps[0].NextOffset, "the checkpoint did not move")
}

// TestLargeQueuedWritesStayOneTransaction: writes whose parameters pass a
// round trip's bound go in several round trips, in the order queued, and
// a failure in the last one still rolls back every one before it.
func TestLargeQueuedWritesStayOneTransaction(t *testing.T) {
	t.Parallel()
	pool, s, cp := queuedTable(t)
	ctx := t.Context()
	large := strings.Repeat("x", 700<<10)
	count := func() (n, bytes int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(length(v)), 0) FROM queued`).Scan(&n, &bytes))
		return n, bytes
	}
	fence := []projectors.Fence{{Projector: "p", Partition: 0, Epoch: cp.Epoch, NextOffset: 3}}

	err := s.InTx(ctx, fence, func(tx projectors.Tx) error {
		for i := range 4 {
			require.NoError(t, pgproj.Queue(tx, fmt.Sprintf("insert %d", i), `INSERT INTO queued VALUES ($1, $2)`, i, large))
		}
		return pgproj.Queue(tx, "insert the first row again", `INSERT INTO queued VALUES (0, 'duplicate')`)
	})
	require.ErrorContains(t, err, "insert the first row again: ")
	n, _ := count()
	require.Zero(t, n, "the round trips before the failed one are rolled back with it")
	cps, err := s.Checkpoints(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, cp.NextOffset, cps[0].NextOffset, "the checkpoint did not move")

	require.NoError(t, s.InTx(ctx, fence, func(tx projectors.Tx) error {
		for i := range 4 {
			require.NoError(t, pgproj.Queue(tx, fmt.Sprintf("insert %d", i), `INSERT INTO queued VALUES ($1, $2)`, i, large))
		}
		// Queued after the large ones, so it runs after them.
		return pgproj.Queue(tx, "shorten 3", `UPDATE queued SET v = 'short' WHERE n = 3`)
	}))
	n, bytes := count()
	require.Equal(t, 4, n)
	require.Equal(t, 3*len(large)+len("short"), bytes)
	cps, err = s.Checkpoints(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(3), cps[0].NextOffset)
}

// TestBatchPlansAvoidSequentialScans: a batch transaction plans with
// sequential scans off (its statements read by key, and a plan cached on a
// small table would stay a sequential scan as it grows), and the setting
// ends with the transaction, not with the pooled connection.
func TestBatchPlansAvoidSequentialScans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, store := assignedStore(t, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 1 // the transaction's connection is the one read after it
	})

	var inside string
	for _, fences := range [][]projectors.Fence{nil, {{Projector: "p", Partition: 0, Epoch: 1, NextOffset: 1}}} {
		require.NoError(t, store.InTx(ctx, fences, func(tx projectors.Tx) error {
			q, err := pgproj.Conn(tx)
			if err != nil {
				return err
			}
			return q.QueryRow(ctx, `SHOW enable_seqscan`).Scan(&inside)
		}))
		require.Equal(t, "off", inside)
		var after string
		require.NoError(t, pool.QueryRow(ctx, `SHOW enable_seqscan`).Scan(&after))
		require.Equal(t, "on", after)
	}
}

// A head stored without its state keeps the stored one, which then names
// the head it is the state of, across several such heads; a head with a
// state clears it; a stream's first head is stored only with its state.
func TestHeadWithoutStateKeepsTheStoredOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	k := oplog.StreamKey{DocumentID: "d", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	head := func(i int64, state string) projectors.Head {
		h := projectors.Head{Stream: k, DocumentType: "t", LastIndex: i, Hash: fmt.Sprintf("h%d", i), Version: int(i/10 + 1), LastTimestampUtcMs: i}
		if state != "" {
			h.State = json.RawMessage(state)
		}
		return h
	}
	put := func(h projectors.Head) {
		t.Helper()
		require.NoError(t, s.InTx(ctx, nil, func(tx projectors.Tx) error {
			tx.QueueHeadsIfNewer("p", []projectors.Head{h})
			return nil
		}))
	}
	stored := func() projectors.Head {
		t.Helper()
		var h projectors.Head
		require.NoError(t, s.InTx(ctx, nil, func(tx projectors.Tx) error {
			heads, err := tx.Heads(ctx, "p", []oplog.StreamKey{k})
			h = heads[k]
			return err
		}))
		return h
	}

	require.NoError(t, s.InTx(ctx, nil, func(tx projectors.Tx) error {
		n, err := tx.PutHeadsIfNewer(ctx, "p", []projectors.Head{head(0, "")})
		require.Zero(t, n, "a first head without a state is not stored")
		return err
	}))
	require.Empty(t, stored().Stream.DocumentID)

	put(head(3, `{"a":3}`))
	h := stored()
	require.Nil(t, h.StateAt)
	require.JSONEq(t, `{"a":3}`, string(h.State))

	put(head(12, ""))
	put(head(15, ""))
	h = stored()
	require.Equal(t, int64(15), h.LastIndex)
	require.Equal(t, "h15", h.Hash)
	require.Equal(t, 2, h.Version)
	require.Equal(t, &projectors.HeadRef{LastIndex: 3, Hash: "h3", Version: 1}, h.StateAt)
	require.JSONEq(t, `{"a":3}`, string(h.State))
	st, err := h.StreamState()
	require.NoError(t, err)
	require.Equal(t, int64(4), st.Revision, "the state decodes at the head it is the state of")
	require.Equal(t, "h3", st.Hash)
	require.Equal(t, 1, st.Version)

	// Claim leaves out a state the caller holds, and still names its head.
	require.NoError(t, s.InTx(ctx, nil, func(tx projectors.Tx) error {
		heads, _, err := tx.Claim(ctx, "p", []oplog.StreamKey{k}, map[oplog.StreamKey]projectors.HeadRef{k: {LastIndex: 15, Hash: "h15", Version: 2}})
		require.Nil(t, heads[k].State)
		require.Equal(t, int64(3), heads[k].StateAt.LastIndex)
		return err
	}))

	put(head(20, `{"a":20}`))
	h = stored()
	require.Nil(t, h.StateAt)
	require.JSONEq(t, `{"a":20}`, string(h.State))
	put(head(19, "")) // lower: changes nothing
	require.Equal(t, int64(20), stored().LastIndex)
	require.Nil(t, stored().StateAt)
}

// A checkpointed transaction notifies the watchers of its own schema as it
// commits, naming its projector; a transaction of another schema, one
// rolled back and one without fences notify no one of this schema.
func TestWatchProgress(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// The watcher's connection carries the pool's settings: an application
	// name of its own lets the test end that connection and no other
	// test's.
	app := fmt.Sprintf("watch-progress-%d", time.Now().UnixNano())
	pool, err := pgxpool.New(ctx, testenv.PostgresSchema(t)+"&application_name="+app)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pgmigrate.Migrate(ctx, pool, pgproj.RunnerMigrations())
	require.NoError(t, err)
	s, other := pgproj.New(pool), newStore(t)
	for _, st := range []*pgproj.Store{s, other} {
		_, err := st.Assign(ctx, "p", 0)
		require.NoError(t, err)
	}
	got := make(chan string, 16)
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pgproj.WatchProgress(watchCtx, s.Pool(), func(projector string) { got <- projector }, func(err error) { t.Logf("watch: %v", err) })
	}()
	defer func() { stop(); <-done }()
	fence := []projectors.Fence{{Projector: "p", Partition: 0, Epoch: 1, NextOffset: 1}}

	// The watcher listens once its connection is made: commit until the
	// first notification arrives.
	require.Eventually(t, func() bool {
		require.NoError(t, s.InTx(ctx, fence, func(projectors.Tx) error { return nil }))
		select {
		case p := <-got:
			require.Equal(t, "p", p)
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}, 30*time.Second, time.Millisecond, "a checkpointed transaction notifies its schema's watcher")
	for len(got) > 0 {
		<-got
	}

	require.NoError(t, other.InTx(ctx, fence, func(projectors.Tx) error { return nil }))
	require.NoError(t, s.InTx(ctx, nil, func(projectors.Tx) error { return nil }))
	require.Error(t, s.InTx(ctx, fence, func(projectors.Tx) error { return fmt.Errorf("the batch failed") }))
	select {
	case p := <-got:
		t.Fatalf("notified of %q by a transaction of another schema, an unfenced one or a rolled-back one", p)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, s.InTx(ctx, fence, func(projectors.Tx) error { return nil }))
	select {
	case p := <-got:
		require.Equal(t, "p", p)
	case <-time.After(10 * time.Second):
		t.Fatal("the next checkpointed transaction did not notify")
	}

	// A listening connection that dies is made again.
	var ended int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND application_name = $1 AND query = 'LISTEN `+pgproj.ProgressChannel+`'`, app).Scan(&ended))
	require.Equal(t, 1, ended, "one listening connection, the watcher's")
	require.Eventually(t, func() bool {
		require.NoError(t, s.InTx(ctx, fence, func(projectors.Tx) error { return nil }))
		select {
		case <-got:
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}, 30*time.Second, time.Millisecond, "the watcher listens again after its connection was terminated")
}

// roundTrips counts what a pool sends to the server: each batch and each
// statement outside one (pgx traces a batch's statements as the batch's) is
// a round trip.
type roundTrips struct{ n atomic.Int32 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A fenced batch that claims its streams and queues its writes costs two
// round trips: BEGIN and the fence check ride with the claim, the writes
// and checkpoints with COMMIT. A transaction that only queues costs one.
func TestBatchTransactionRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rt := &roundTrips{}
	pool, s := assignedStore(t, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = rt })
	// A connection made and idle in the pool, so that its set-up is not
	// counted.
	require.NoError(t, pool.Ping(ctx))

	k := oplog.StreamKey{DocumentID: "d", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	head := projectors.Head{Stream: k, DocumentType: "t", LastIndex: 0, Hash: "h", Version: 1, State: json.RawMessage(`{}`)}
	rt.n.Store(0)
	require.NoError(t, s.InTx(ctx, []projectors.Fence{{Projector: "p", Partition: 0, Epoch: 1, NextOffset: 4}}, func(tx projectors.Tx) error {
		heads, _, err := tx.Claim(ctx, "p", []oplog.StreamKey{k}, nil)
		require.Empty(t, heads)
		tx.QueueHeadsIfNewer("p", []projectors.Head{head})
		return err
	}))
	require.EqualValues(t, 2, rt.n.Load(), "round trips of a claimed batch")

	rt.n.Store(0)
	head.LastIndex = 1
	require.NoError(t, s.InTx(ctx, []projectors.Fence{{Projector: "p", Partition: 0, Epoch: 1, NextOffset: 5}}, func(tx projectors.Tx) error {
		tx.QueueHeadsIfNewer("p", []projectors.Head{head})
		return nil
	}))
	require.EqualValues(t, 1, rt.n.Load(), "round trips of a batch that only queues")

	last, err := s.LastIndexes(ctx, "p", []string{"d"})
	require.NoError(t, err)
	require.Equal(t, map[oplog.StreamKey]int64{k: 1}, last)
	cps, err := s.Checkpoints(ctx, "p")
	require.NoError(t, err)
	require.Len(t, cps, 1)
	require.EqualValues(t, 5, cps[0].NextOffset)
}
