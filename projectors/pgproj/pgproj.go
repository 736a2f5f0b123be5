// Package pgproj is the Postgres implementation of the projector runner's
// database seam (projectors.Store and projectors.Tx): fenced checkpoints,
// verified stream heads and quarantines, and the runner's migration
// set (RunnerMigrations). Projector stores get the connection
// of a batch's transaction with Conn, so only Postgres store code imports
// pgx. A batch transaction costs two round trips, however many partitions
// it covers: BEGIN, the fence check, the stream locks and the reads of heads
// and quarantines (Claim), then the writes queued during the batch (the
// projector's, the new heads) with the checkpoints and COMMIT, split into
// more round trips only where they carry more than a megabyte of
// parameters (roundTripBytes). A projector store pays a round trip of its
// own only for a statement whose result it reads. A checkpointed
// transaction also notifies ProgressChannel, which readers waiting for a
// projection's progress follow with WatchProgress.
package pgproj

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/doclog/doclog/internal/pgtx"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors"
)

// Store is projectors.Store over a pgx pool. The schema must be migrated
// with pgmigrate.Migrate(ctx, pool, RunnerMigrations()).
type Store struct {
	pool *pgxpool.Pool
}

var _ projectors.Store = (*Store)(nil)

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool returns the pool, for projector stores that share it.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Querier is the batch transaction as projector stores write through it:
// a connection inside the transaction InTx opened.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// tx is projectors.Tx over a connection in a transaction InTx began. The
// transaction is run by hand rather than as a pgx.Tx so that its statements
// can share round trips: BEGIN and the fence check go with the first
// statements sent (the stream locks and the reads of heads and
// quarantines), the checkpoint with COMMIT.
type tx struct {
	conn   *pgx.Conn
	queued []queued
	// prelude is BEGIN, the planner setting and the fence check until they
	// are sent, with the first statements of the transaction (send).
	prelude *pgx.Batch
	fences  []projectors.Fence
}

// queued is a write sent with the transaction's commit.
type queued struct {
	what string // what it does, for its error
	sql  string
	args []any
}

// Queue adds a write to the batch transaction t's last round trip, which
// carries it with the checkpoints and COMMIT: a projector store's writes
// whose results it does not read cost no round trip of their own, but for
// large values, which go before it a megabyte per round trip. Queued
// writes run in the order queued, after everything else the batch did; one
// that fails rolls the whole batch back, and its error says what it was
// doing (what, a lowercase phrase).
func Queue(t projectors.Tx, what, sql string, args ...any) error {
	x, ok := t.(*tx)
	if !ok {
		return fmt.Errorf("projector transaction %T is not a Postgres one", t)
	}
	x.queued = append(x.queued, queued{what: what, sql: sql, args: args})
	return nil
}

// Conn returns the connection under a projectors.Tx this package made, for
// projector stores writing their tables in the batch transaction.
func Conn(t projectors.Tx) (Querier, error) {
	if x, ok := t.(*tx); ok {
		return x, nil
	}
	return nil, fmt.Errorf("projector transaction %T is not a Postgres one", t)
}

// Assign bumps the partition's epoch, creating its checkpoint row.
func (s *Store) Assign(ctx context.Context, projector string, partition int32) (projectors.Checkpoint, error) {
	cp := projectors.Checkpoint{Partition: partition}
	err := s.pool.QueryRow(ctx, `INSERT INTO projector_checkpoints (projector, partition, epoch) VALUES ($1, $2, 1)
ON CONFLICT (projector, partition) DO UPDATE SET epoch = projector_checkpoints.epoch + 1, updated_at = now()
RETURNING next_offset, epoch`, projector, partition).Scan(&cp.NextOffset, &cp.Epoch)
	if err != nil {
		return cp, fmt.Errorf("assign partition %d of projector %s: %w", partition, projector, err)
	}
	return cp, nil
}

// fenceSQL locks the batch's partitions' checkpoint rows FOR UPDATE, in
// partition order so that two batches never wait on each other crosswise (an
// Assign of one of them waits for this batch, and this batch sees any Assign
// that committed before it), and raises an error when one's epoch is not the
// fence's. Raising on the server, not comparing in the client, is what lets
// the check share a round trip with the statements after it: the error
// skips them and the COMMIT, so a fenced batch writes nothing. The error is
// a failed cast of fencedMark's text, read back by fencedError.
const fenceSQL = `SELECT CASE WHEN c.epoch IS NOT DISTINCT FROM w.e THEN 0
    ELSE ('` + fencedMark + ` ' || w.p || ' at epoch ' || coalesce(c.epoch, -1))::int END
FROM unnest($2::int[], $3::bigint[]) AS w(p, e)
LEFT JOIN (SELECT partition, epoch FROM projector_checkpoints
           WHERE projector = $1 AND partition = ANY($2::int[]) ORDER BY partition FOR UPDATE) AS c
  ON c.partition = w.p`

// fencedMark starts the text fenceSQL fails to cast for a fenced partition.
const fencedMark = "doclog: fenced partition"

// fencedError turns fenceSQL's error into a FencedError for one of fences;
// any other error is the check's failure to run.
func fencedError(err error, fences []projectors.Fence) error {
	var pgErr *pgconn.PgError
	i := -1
	if errors.As(err, &pgErr) {
		i = strings.Index(pgErr.Message, fencedMark)
	}
	if i < 0 {
		return fmt.Errorf("check the epochs of the batch's partitions: %w", err)
	}
	var part int32
	var current int64
	if _, serr := fmt.Sscanf(pgErr.Message[i+len(fencedMark):], " %d at epoch %d", &part, &current); serr != nil {
		return fmt.Errorf("reading the fence's refusal %q: %w", pgErr.Message, serr)
	}
	for _, f := range fences {
		if f.Partition == part {
			return &projectors.FencedError{Projector: f.Projector, Partition: part, Epoch: f.Epoch, Current: current}
		}
	}
	return fmt.Errorf("the fence refused partition %d, which the batch does not fence: %w", part, err)
}

// checkpointSQL moves every fenced partition's checkpoint in one statement.
const checkpointSQL = `UPDATE projector_checkpoints c SET next_offset = u.o, updated_at = now()
FROM unnest($2::int[], $3::bigint[]) AS u(p, o) WHERE c.projector = $1 AND c.partition = u.p`

// keyedPlansSQL keeps the batch's statements, all keyed, off sequential
// scans (pgtx.NoSeqScan).
const keyedPlansSQL = `SELECT ` + pgtx.NoSeqScan

// InTx runs fn in a transaction, fenced and checkpointed for every fence
// given (none: neither). A batch costs two round trips however many
// partitions it covers: BEGIN and the fence check go with the first
// statements fn sends (the claim of the streams), and the writes fn queued,
// the checkpoints and COMMIT with the last.
func (s *Store) InTx(ctx context.Context, fences []projectors.Fence, fn func(projectors.Tx) error) (err error) {
	projector, parts, epochs, offsets, err := fenceArrays(fences)
	if err != nil {
		return err
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection: %w", err)
	}
	defer c.Release()
	conn := c.Conn()
	defer func() {
		if p := recover(); p != nil {
			pgtx.Rollback(ctx, conn)
			panic(p)
		}
		if err != nil {
			pgtx.Rollback(ctx, conn)
		}
	}()

	t := &tx{conn: conn, fences: fences}
	t.prelude = &pgx.Batch{}
	t.prelude.Queue("BEGIN")
	t.prelude.Queue(keyedPlansSQL)
	if len(fences) > 0 {
		t.prelude.Queue(fenceSQL, projector, parts, epochs)
	}
	if err := fn(t); err != nil {
		return err
	}

	// The queued writes go in round trips of at most roundTripBytes of
	// parameters each; the checkpoints and COMMIT go with the last.
	writes := t.queued
	for n := roundTrip(writes); n < len(writes); n = roundTrip(writes) {
		if err := t.sendQueued(ctx, writes[:n]); err != nil {
			return err
		}
		writes = writes[n:]
	}
	b := batchOf(writes)
	if len(fences) > 0 {
		b.Queue(checkpointSQL, projector, parts, offsets)
		b.Queue(notifySQL, ProgressChannel, projector)
	}
	b.Queue("COMMIT")
	br, err := t.send(ctx, b)
	if err != nil {
		return err
	}
	defer br.Close()
	if err := execQueued(br, writes); err != nil {
		return err
	}
	if len(fences) > 0 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("move the checkpoints of partitions %v: %w", parts, err)
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("notify the progress of %s: %w", projector, err)
		}
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return br.Close()
}

// send sends b, behind the transaction's BEGIN and fence check while those
// have not been sent, whose results it reads: the caller reads b's.
func (t *tx) send(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	if t.prelude == nil {
		return t.conn.SendBatch(ctx, b), nil
	}
	pre := t.prelude
	t.prelude = nil
	n := pre.Len()
	pre.QueuedQueries = append(pre.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(ctx, pre)
	for i := range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			if i < 2 {
				return nil, fmt.Errorf("begin: %w", err)
			}
			return nil, fencedError(err, t.fences)
		}
	}
	return br, nil
}

// begin sends BEGIN and the fence check in a round trip of their own, for a
// statement that cannot share theirs.
func (t *tx) begin(ctx context.Context) error {
	if t.prelude == nil {
		return nil
	}
	br, err := t.send(ctx, &pgx.Batch{})
	if err != nil {
		return err
	}
	return br.Close()
}

// Exec, Query, QueryRow and SendBatch make tx the Querier projector stores
// write through (Conn); the first one sends BEGIN and the fence check.
func (t *tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br, err := t.send(ctx, b)
	if err != nil {
		return errBatch{err}
	}
	return br
}

// errRow and errBatch carry a failure to begin to a caller of QueryRow or
// SendBatch, which report errors when read.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// roundTripBytes bounds the parameter bytes of the queued writes one round
// trip carries. pgx encodes a round trip's messages into one buffer that
// grows by doubling from a kilobyte and is dropped after each flush: a
// batch of large states sent at once (a 1 MB state per changed stream)
// made it tens of megabytes of fresh memory per batch, which cost more than
// the extra round trips do.
const roundTripBytes = 1 << 20

// roundTrip returns how many of the queued writes go in the next round
// trip: at least one, and no more than roundTripBytes of parameters.
func roundTrip(qs []queued) int {
	size := 0
	for i, q := range qs {
		size += argBytes(q.args)
		if size > roundTripBytes && i > 0 {
			return i
		}
	}
	return len(qs)
}

// argBytes is about the bytes args encode to: the lengths of its strings
// and byte slices, and of those in slices of them.
func argBytes(args []any) int {
	n := 0
	for _, a := range args {
		switch v := a.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		case json.RawMessage:
			n += len(v)
		case []string:
			for _, s := range v {
				n += len(s)
			}
		}
	}
	return n
}

// sendQueued sends writes in one round trip of their own.
func (t *tx) sendQueued(ctx context.Context, writes []queued) error {
	br, err := t.send(ctx, batchOf(writes))
	if err != nil {
		return err
	}
	defer br.Close()
	if err := execQueued(br, writes); err != nil {
		return err
	}
	return br.Close()
}

// batchOf is a batch of the writes' statements.
func batchOf(writes []queued) *pgx.Batch {
	b := &pgx.Batch{}
	for _, q := range writes {
		b.Queue(q.sql, q.args...)
	}
	return b
}

// execQueued reads the results of writes from br, each error saying what
// its statement was doing.
func execQueued(br pgx.BatchResults, writes []queued) error {
	for _, q := range writes {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", q.what, err)
		}
	}
	return nil
}

// fenceArrays checks that the fences name one projector and distinct
// partitions, and returns them as the statements' arrays.
func fenceArrays(fences []projectors.Fence) (projector string, parts []int32, epochs, offsets []int64, err error) {
	for i, f := range fences {
		switch {
		case i == 0:
			projector = f.Projector
		case f.Projector != projector:
			return "", nil, nil, nil, fmt.Errorf("fence batch of projectors %s and %s: a batch belongs to one projector", projector, f.Projector)
		case slices.Contains(parts, f.Partition):
			return "", nil, nil, nil, fmt.Errorf("fence batch of projector %s: partition %d is fenced twice", projector, f.Partition)
		}
		parts = append(parts, f.Partition)
		epochs = append(epochs, f.Epoch)
		offsets = append(offsets, f.NextOffset)
	}
	return projector, parts, epochs, offsets, nil
}

func streamArrays(streams []oplog.StreamKey) (docs, scopes, branches []string) {
	docs = make([]string, len(streams))
	scopes = make([]string, len(streams))
	branches = make([]string, len(streams))
	for i, k := range streams {
		docs[i], scopes[i], branches[i] = k.DocumentID, k.Scope, k.Branch
	}
	return docs, scopes, branches
}

// projectorLockSQL takes the projector-wide lock every claim holds shared,
// exclusively, for the switch of generations.
const projectorLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('projector:' || $1, 0))`

// sharedLockSQL holds the projector-wide lock shared, taken before any
// stream's lock so that a switch waiting for it never waits on a
// transaction that waits for a stream.
const sharedLockSQL = `SELECT pg_advisory_xact_lock_shared(hashtextextended('projector:' || $1, 0))`

// lockSQL takes the streams' transaction advisory locks in sorted key
// order. The key is prefixed by the projector so projectors never wait on
// each other (nor on the log's writers).
const lockSQL = `SELECT count(pg_advisory_xact_lock(k)) FROM (
  SELECT DISTINCT hashtextextended('projector:' || $1 || ':' || d || '/' || s || '/' || b, 0) AS k
  FROM unnest($2::text[], $3::text[], $4::text[]) AS t(d, s, b) ORDER BY k) AS keys`

const headsSQL = `SELECT p.document_id, p.scope, p.branch, p.document_type, p.last_index, p.hash, p.model_version, p.state::text, p.last_ts_utc_ms,
  p.state_index, p.state_hash, p.state_version
FROM unnest($2::text[], $3::text[], $4::text[]) AS k(d, s, b)
JOIN projector_streams p ON p.projector = $1 AND p.document_id = k.d AND p.scope = k.s AND p.branch = k.b`

const quarantinesSQL = `SELECT q.document_id, q.scope, q.branch, q.idx, q.error_name, q.reason, q.quarantined_at
FROM unnest($2::text[], $3::text[], $4::text[]) AS k(d, s, b)
JOIN quarantined_streams q ON q.projector = $1 AND q.document_id = k.d AND q.scope = k.s AND q.branch = k.b`

// claimHeadsSQL is headsSQL leaving out the state of a head equal to the
// one the caller holds ($5..$7; an index of -2 holds none).
const claimHeadsSQL = `SELECT p.document_id, p.scope, p.branch, p.document_type, p.last_index, p.hash, p.model_version,
  CASE WHEN p.last_index = k.i AND p.hash = k.h AND p.model_version = k.v THEN NULL ELSE p.state::text END, p.last_ts_utc_ms,
  p.state_index, p.state_hash, p.state_version
FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::int[]) AS k(d, s, b, i, h, v)
JOIN projector_streams p ON p.projector = $1 AND p.document_id = k.d AND p.scope = k.s AND p.branch = k.b`

// Claim locks the streams and reads their heads and quarantines in one
// round trip.
func (t *tx) Claim(ctx context.Context, projector string, streams []oplog.StreamKey, held map[oplog.StreamKey]projectors.HeadRef) (map[oplog.StreamKey]projectors.Head, map[oplog.StreamKey]projectors.Quarantine, error) {
	heads := make(map[oplog.StreamKey]projectors.Head, len(streams))
	qs := map[oplog.StreamKey]projectors.Quarantine{}
	if len(streams) == 0 {
		return heads, qs, nil
	}
	d, s, b := streamArrays(streams)
	idx, hashes, versions := make([]int64, len(streams)), make([]string, len(streams)), make([]int32, len(streams))
	for i, k := range streams {
		idx[i] = -2
		if ref, ok := held[k]; ok {
			idx[i], hashes[i], versions[i] = ref.LastIndex, ref.Hash, int32(ref.Version)
		}
	}
	batch := &pgx.Batch{}
	batch.Queue(sharedLockSQL, projector)
	batch.Queue(lockSQL, projector, d, s, b)
	batch.Queue(claimHeadsSQL, projector, d, s, b, idx, hashes, versions)
	batch.Queue(quarantinesSQL, projector, d, s, b)
	br := t.SendBatch(ctx, batch)
	defer br.Close()
	for range 2 { // the projector's lock, the streams'
		if _, err := br.Exec(); err != nil {
			return nil, nil, fmt.Errorf("lock %d streams: %w", len(streams), err)
		}
	}
	rows, _ := br.Query()
	if err := scanHeads(rows, heads); err != nil {
		return nil, nil, fmt.Errorf("read %d stream heads: %w", len(streams), err)
	}
	rows, _ = br.Query()
	list, err := collectQuarantines(rows)
	if err != nil {
		return nil, nil, err
	}
	for _, q := range list {
		qs[q.Stream] = q
	}
	return heads, qs, br.Close()
}

// Heads reads the stored heads of the streams.
func (t *tx) Heads(ctx context.Context, projector string, streams []oplog.StreamKey) (map[oplog.StreamKey]projectors.Head, error) {
	heads := make(map[oplog.StreamKey]projectors.Head, len(streams))
	if len(streams) == 0 {
		return heads, nil
	}
	d, s, b := streamArrays(streams)
	rows, err := t.Query(ctx, headsSQL, projector, d, s, b)
	if err == nil {
		err = scanHeads(rows, heads)
	}
	if err != nil {
		return nil, fmt.Errorf("read %d stream heads: %w", len(streams), err)
	}
	return heads, nil
}

func scanHeads(rows pgx.Rows, into map[oplog.StreamKey]projectors.Head) error {
	defer rows.Close()
	for rows.Next() {
		var h projectors.Head
		var state *string // NULL: the caller holds it (Claim)
		var stateIndex *int64
		var stateHash *string
		var stateVersion *int
		if err := rows.Scan(&h.Stream.DocumentID, &h.Stream.Scope, &h.Stream.Branch, &h.DocumentType, &h.LastIndex, &h.Hash, &h.Version, &state, &h.LastTimestampUtcMs,
			&stateIndex, &stateHash, &stateVersion); err != nil {
			return err
		}
		if state != nil {
			h.State = []byte(*state)
		}
		if stateIndex != nil && stateHash != nil && stateVersion != nil {
			h.StateAt = &projectors.HeadRef{LastIndex: *stateIndex, Hash: *stateHash, Version: *stateVersion}
		}
		into[h.Stream] = h
	}
	return rows.Err()
}

// querier is what a pool and a transaction share.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func quarantined(ctx context.Context, q querier, projector string, streams []oplog.StreamKey) (map[oplog.StreamKey]projectors.Quarantine, error) {
	out := map[oplog.StreamKey]projectors.Quarantine{}
	if len(streams) == 0 {
		return out, nil
	}
	d, s, b := streamArrays(streams)
	rows, err := q.Query(ctx, quarantinesSQL, projector, d, s, b)
	if err != nil {
		return nil, fmt.Errorf("read quarantines: %w", err)
	}
	qs, err := collectQuarantines(rows)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		out[q.Stream] = q
	}
	return out, nil
}

func collectQuarantines(rows pgx.Rows) ([]projectors.Quarantine, error) {
	defer rows.Close()
	var out []projectors.Quarantine
	for rows.Next() {
		var q projectors.Quarantine
		if err := rows.Scan(&q.Stream.DocumentID, &q.Stream.Scope, &q.Stream.Branch, &q.Index, &q.ErrorName, &q.Reason, &q.Since); err != nil {
			return nil, fmt.Errorf("read quarantines: %w", err)
		}
		q.Since = q.Since.UTC()
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read quarantines: %w", err)
	}
	return out, nil
}

// putHeadsSQL upserts heads that carry their state, never lowering a
// stored last index; the state is then the head's own (state_index and the
// rest NULL).
const putHeadsSQL = `INSERT INTO projector_streams AS p (projector, document_id, scope, branch, document_type, last_index, hash, model_version, state, last_ts_utc_ms)
SELECT $1, d, s, b, ty, i, h, v, st::json, ts FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::int[], $9::text[], $10::bigint[]) AS u(d, s, b, ty, i, h, v, st, ts)
ON CONFLICT (projector, document_id, scope, branch) DO UPDATE SET
  document_type = EXCLUDED.document_type, last_index = EXCLUDED.last_index, hash = EXCLUDED.hash,
  model_version = EXCLUDED.model_version, state = EXCLUDED.state, last_ts_utc_ms = EXCLUDED.last_ts_utc_ms, updated_at = now(),
  state_index = NULL, state_hash = NULL, state_version = NULL
WHERE p.last_index < EXCLUDED.last_index`

// moveHeadsSQL moves stored heads without a state of their own, never
// lowering a stored last index: the stored state stays, and names the head
// it is the state after (the old row's own, unless it named an earlier one
// already). A stream with no stored head gets none: its first head carries
// its state, and the runner never sends one without.
const moveHeadsSQL = `UPDATE projector_streams AS p SET
  document_type = u.ty, last_index = u.i, hash = u.h, model_version = u.v, last_ts_utc_ms = u.ts, updated_at = now(),
  state_index = COALESCE(p.state_index, p.last_index), state_hash = COALESCE(p.state_hash, p.hash),
  state_version = COALESCE(p.state_version, p.model_version)
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::int[], $9::bigint[]) AS u(d, s, b, ty, i, h, v, ts)
WHERE p.projector = $1 AND p.document_id = u.d AND p.scope = u.s AND p.branch = u.b AND p.last_index < u.i`

// PutHeadsIfNewer upserts heads, never lowering a stored last index.
func (t *tx) PutHeadsIfNewer(ctx context.Context, projector string, heads []projectors.Head) (int, error) {
	n := 0
	for _, w := range headWrites(projector, heads) {
		tag, err := t.Exec(ctx, w.sql, w.args...)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", w.what, err)
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}

// QueueHeadsIfNewer is PutHeadsIfNewer sent with the commit (Queue).
func (t *tx) QueueHeadsIfNewer(projector string, heads []projectors.Head) {
	t.queued = append(t.queued, headWrites(projector, heads)...)
}

// headWrites are the statements that store heads: one for those with a
// state (putHeadsSQL), one for those without (moveHeadsSQL).
func headWrites(projector string, heads []projectors.Head) []queued {
	var with, without []projectors.Head
	for _, h := range heads {
		if h.State != nil {
			with = append(with, h)
		} else {
			without = append(without, h)
		}
	}
	var out []queued
	if len(with) > 0 {
		out = append(out, queued{what: fmt.Sprintf("store %d stream heads", len(with)), sql: putHeadsSQL, args: headArgs(projector, with, true)})
	}
	if len(without) > 0 {
		out = append(out, queued{what: fmt.Sprintf("move %d stream heads", len(without)), sql: moveHeadsSQL, args: headArgs(projector, without, false)})
	}
	return out
}

// headArgs are putHeadsSQL's arguments, or moveHeadsSQL's without the
// states.
func headArgs(projector string, heads []projectors.Head, withState bool) []any {
	n := len(heads)
	d, s, b := make([]string, n), make([]string, n), make([]string, n)
	types, hashes := make([]string, n), make([]string, n)
	idx, ts := make([]int64, n), make([]int64, n)
	versions := make([]int32, n)
	for i, h := range heads {
		d[i], s[i], b[i] = h.Stream.DocumentID, h.Stream.Scope, h.Stream.Branch
		types[i], hashes[i] = h.DocumentType, h.Hash
		idx[i], ts[i], versions[i] = h.LastIndex, h.LastTimestampUtcMs, int32(h.Version)
	}
	if !withState {
		return []any{projector, d, s, b, types, idx, hashes, versions, ts}
	}
	states := make([]string, n)
	for i, h := range heads {
		states[i] = string(h.State)
	}
	return []any{projector, d, s, b, types, idx, hashes, versions, states, ts}
}

// Quarantine records a quarantine; a stream's first one is kept.
func (t *tx) Quarantine(ctx context.Context, projector string, q projectors.Quarantine) error {
	_, err := t.Exec(ctx, `INSERT INTO quarantined_streams (projector, document_id, scope, branch, idx, error_name, reason)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		projector, q.Stream.DocumentID, q.Stream.Scope, q.Stream.Branch, q.Index, q.ErrorName, q.Reason)
	if err != nil {
		return fmt.Errorf("quarantine %s at index %d: %w", q.Stream, q.Index, err)
	}
	return nil
}

// ResetStream forgets the stream's stored head and lifts its quarantine, so
// the transaction's next advance rebuilds it from index 0 of the log. The
// caller holds the stream's lock (Claim).
func (t *tx) ResetStream(ctx context.Context, projector string, stream oplog.StreamKey) error {
	batch := &pgx.Batch{}
	batch.Queue(`DELETE FROM projector_streams WHERE projector = $1 AND document_id = $2 AND scope = $3 AND branch = $4`,
		projector, stream.DocumentID, stream.Scope, stream.Branch)
	batch.Queue(`DELETE FROM quarantined_streams WHERE projector = $1 AND document_id = $2 AND scope = $3 AND branch = $4`,
		projector, stream.DocumentID, stream.Scope, stream.Branch)
	if err := t.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("reset the stream head of %s: %w", stream, err)
	}
	return nil
}

// LastIndexes reads the stored last index of the documents' streams.
func (s *Store) LastIndexes(ctx context.Context, projector string, documentIDs []string) (map[oplog.StreamKey]int64, error) {
	out := map[oplog.StreamKey]int64{}
	if len(documentIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT document_id, scope, branch, last_index FROM projector_streams
WHERE projector = $1 AND document_id = ANY($2::text[])`, projector, documentIDs)
	if err != nil {
		return nil, fmt.Errorf("read last indexes of %d documents: %w", len(documentIDs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var k oplog.StreamKey
		var i int64
		if err := rows.Scan(&k.DocumentID, &k.Scope, &k.Branch, &i); err != nil {
			return nil, fmt.Errorf("read last indexes: %w", err)
		}
		out[k] = i
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read last indexes: %w", err)
	}
	return out, nil
}

// Quarantines lists the projector's quarantined streams in stream order.
func (s *Store) Quarantines(ctx context.Context, projector string) ([]projectors.Quarantine, error) {
	rows, err := s.pool.Query(ctx, `SELECT document_id, scope, branch, idx, error_name, reason, quarantined_at FROM quarantined_streams
WHERE projector = $1 ORDER BY document_id, scope, branch`, projector)
	if err != nil {
		return nil, fmt.Errorf("list quarantines of projector %s: %w", projector, err)
	}
	return collectQuarantines(rows)
}

// QuarantinesOf reads the quarantines among the streams.
func (s *Store) QuarantinesOf(ctx context.Context, projector string, streams []oplog.StreamKey) (map[oplog.StreamKey]projectors.Quarantine, error) {
	return quarantined(ctx, s.pool, projector, streams)
}

// Release lifts a stream's quarantine.
func (s *Store) Release(ctx context.Context, projector string, stream oplog.StreamKey) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM quarantined_streams WHERE projector = $1 AND document_id = $2 AND scope = $3 AND branch = $4`,
		projector, stream.DocumentID, stream.Scope, stream.Branch)
	if err != nil {
		return false, fmt.Errorf("release the quarantine of %s: %w", stream, err)
	}
	return tag.RowsAffected() > 0, nil
}

// Checkpoints lists the projector's partitions in partition order.
func (s *Store) Checkpoints(ctx context.Context, projector string) ([]projectors.Checkpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT partition, next_offset, epoch FROM projector_checkpoints WHERE projector = $1 ORDER BY partition`, projector)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of projector %s: %w", projector, err)
	}
	defer rows.Close()
	var out []projectors.Checkpoint
	for rows.Next() {
		var c projectors.Checkpoint
		if err := rows.Scan(&c.Partition, &c.NextOffset, &c.Epoch); err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	return out, nil
}
