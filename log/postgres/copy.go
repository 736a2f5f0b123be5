package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/doclog/doclog/internal/pgtx"
)

// The copy path appends a batch in three round trips instead of one:
// the guards are read under the stream locks, the operations of the requests
// whose guards hold go in with one binary COPY, and the job results,
// keyframes and the read-back of the ordinals are pipelined with COMMIT.
// COPY inserts a buffer of rows at a time (heap_multi_insert) where
// INSERT … SELECT inserts row by row, and its binary encoding costs the
// client a fraction of the parameter arrays'; on a local socket that
// outweighs two more round trips from a single operation on
// (BenchmarkAppendPath, docs/benchmarks.md).
//
// Checking in one statement and writing in another is atomic here because
// every writer of operations takes the stream locks before its first read
// and holds them to its commit: no head the guard read can move before the
// COPY lands. The primary key and the identity index still stand behind it:
// a row that would break them makes the COPY raise, and the batch is re-run
// one request at a time like any batch whose statement raised.

// settledSQL lists which of the jobs already have a result.
const settledSQL = `SELECT job_id FROM jobs WHERE job_id = ANY($1::text[])`

// xactSQL assigns the transaction its id before the first write (the locks
// are already held, so the tail's order still agrees with each stream's) and
// reads what the batch's rows share.
const xactSQL = `SELECT pg_current_xact_id()::text, now()`

// insertJobsSQL writes the job results of the requests that landed.
const insertJobsSQL = `INSERT INTO jobs (job_id, document_id, status, streams, token, error_history)
SELECT j.job_id, j.document_id, j.status, j.streams::json, j.token::json, j.error_history::json
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
     AS j(job_id, document_id, status, streams, token, error_history)`

// insertKeyframesSQL writes the keyframes of the requests that landed.
const insertKeyframesSQL = `INSERT INTO keyframes (document_id, scope, branch, idx, document_type, model_version, state, hash)
SELECT k.document_id, k.scope, k.branch, k.idx, k.document_type, k.model_version, k.state::json, k.hash
FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::int4[], $7::text[], $8::text[])
     AS k(document_id, scope, branch, idx, document_type, model_version, state, hash)
ON CONFLICT (document_id, scope, branch, idx) DO UPDATE
SET document_type = excluded.document_type, model_version = excluded.model_version,
    state = excluded.state, hash = excluded.hash, created_at = now()`

// ordinalsSQL reads back the ordinals COPY assigned. One session draws them
// in insertion order, so ordinal order is the order the rows were copied.
// It answers in appendSQL's shape, so landed.scan reads both.
const ordinalsSQL = `SELECT NULL::int4, idx, ordinal FROM operations WHERE txid = $1::text::xid8 ORDER BY ordinal`

// copyColumns are the operation columns the copy path fills; the others
// (ordinal, txid, written_at) take their defaults, as with the insert.
var copyColumns = []string{"document_id", "scope", "branch", "idx", "skip", "op_id", "job_id",
	"document_type", "model_version", "hash", "ts_utc_ms", "action_id", "action"}

// appendCopy runs a batch of independent plans through the copy path.
func (s *Store) appendCopy(ctx context.Context, plans []*plan) (*landed, error) {
	args, keys := columnar(plans)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring a connection to append: %w", err)
	}
	defer conn.Release()

	l := newLanded()
	err = func() error {
		if err := guardUnderLocks(ctx, conn.Conn(), args, keys, l); err != nil {
			return err
		}
		if len(l.ok) < len(plans) {
			// Rare: only the requests that land are written.
			var landing []*plan
			for _, p := range plans {
				if l.ok[p.pos] {
					landing = append(landing, p)
				}
			}
			args, _ = columnar(landing)
		}
		if _, err := conn.Conn().CopyFrom(ctx, pgx.Identifier{"operations"}, copyColumns, &opRows{a: args}); err != nil {
			return err
		}
		return finishCopy(ctx, conn.Conn(), args, l)
	}()
	if err != nil {
		pgtx.Rollback(ctx, conn.Conn())
		return nil, fmt.Errorf("appending a batch of %d requests by copy: %w", len(plans), err)
	}
	return l, nil
}

// guardUnderLocks opens the transaction, takes the stream locks and decides
// which requests land (l.ok): every written stream at its expected revision,
// no read-set stream past its recorded revision, and no job with a result.
func guardUnderLocks(ctx context.Context, conn *pgx.Conn, a *appendArgs, keys []string, l *landed) error {
	docs := append(append(make([]string, 0, len(a.eDoc)+len(a.cDoc)), a.eDoc...), a.cDoc...)
	scopes := append(append(make([]string, 0, len(docs)), a.eScope...), a.cScope...)
	branches := append(append(make([]string, 0, len(docs)), a.eBranch...), a.cBranch...)

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(hotPathSQL)
	b.Queue(lockSQL, keys)
	b.Queue(headsSQL, docs, scopes, branches)
	b.Queue(settledSQL, a.jID)
	b.Queue(xactSQL)
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	for range 3 { // BEGIN, the planner settings, lock
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rows, _ := br.Query()
	heads, err := collectHeads(rows, len(docs))
	if err != nil {
		return err
	}
	rows, _ = br.Query()
	settled, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("reading settled jobs: %w", err)
	}
	if err := l.scanTx(br.QueryRow()); err != nil {
		return fmt.Errorf("reading the transaction id: %w", err)
	}
	if err := br.Close(); err != nil {
		return err
	}

	bad := make(map[int32]bool)
	for i, rev := range a.eRev {
		if heads[i] != rev {
			bad[a.eReq[i]] = true
		}
	}
	ne := len(a.eRev)
	for i, rev := range a.cRev {
		if heads[ne+i] > rev {
			bad[a.cReq[i]] = true
		}
	}
	if len(settled) > 0 {
		isSettled := make(map[string]bool, len(settled))
		for _, id := range settled {
			isSettled[id] = true
		}
		for i, id := range a.jID {
			if isSettled[id] {
				bad[a.jReq[i]] = true
			}
		}
	}
	for _, r := range a.reqs {
		if !bad[r] {
			l.ok[int(r)] = true
		}
	}
	return nil
}

// finishCopy writes the job results and keyframes of a, reads back the
// ordinals and commits, in one round trip.
func finishCopy(ctx context.Context, conn *pgx.Conn, a *appendArgs, l *landed) error {
	b := &pgx.Batch{}
	if len(a.jID) > 0 {
		b.Queue(insertJobsSQL, a.jID, a.jDoc, a.jStatus, a.jStreams, a.jToken, a.jErrs)
	}
	if len(a.kDoc) > 0 {
		b.Queue(insertKeyframesSQL, a.kDoc, a.kScope, a.kBranch, a.kIdx, a.kType, a.kVersion, a.kState, a.kHash)
	}
	b.Queue(ordinalsSQL, strconv.FormatUint(l.txid, 10))
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	for range b.Len() - 2 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rows, _ := br.Query()
	if err := l.scan(rows); err != nil {
		return fmt.Errorf("reading back ordinals: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return err
	}
	return br.Close()
}

// opRows feeds COPY the operations of a in the order appendArgs holds them,
// which is the order landed.stored consumes them. One row buffer is reused:
// pgx encodes each row before asking for the next.
type opRows struct {
	a   *appendArgs
	i   int
	row [13]any
}

func (o *opRows) Next() bool {
	if o.i >= len(o.a.oStream) {
		return false
	}
	o.i++
	return true
}
func (o *opRows) Values() ([]any, error) {
	a, i := o.a, o.i-1
	s, j := a.oStream[i]-1, a.oJob[i]-1
	o.row = [13]any{a.eDoc[s], a.eScope[s], a.eBranch[s], a.oIdx[i], a.oSkip[i], a.oOpID[i], a.jID[j],
		a.eType[s], a.oVersion[i], a.oHash[i], a.oTS[i], a.oActionID[i], a.oAction[i]}
	return o.row[:], nil
}

func (o *opRows) Err() error { return nil }
