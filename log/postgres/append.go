package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/doclog/doclog/internal/pgtx"
	oplog "github.com/doclog/doclog/log"
)

// lockSQL takes every stream's transaction-scoped advisory lock in sorted key
// order, deduplicated, in one statement. Volatile functions in the target list
// are evaluated after ORDER BY, so the locks are taken in key order and
// overlapping appends serialize instead of deadlocking.
const lockSQL = `SELECT pg_advisory_xact_lock(k)
FROM (SELECT DISTINCT hashtextextended(s, 0) AS k FROM unnest($1::text[]) AS s) AS t
ORDER BY k`

// appendSQL guards and writes every request of a batch in one statement. A
// request is "bad" when one of its streams is not at the expected revision,
// a read-set stream grew past its recorded revision, or one of its jobs has a
// result; the operations, job results and keyframes of the others are
// inserted. It returns the requests that landed and, in insertion order,
// each inserted row's index and ordinal: the insert reads the operations
// straight from unnest, filtered but never joined or sorted, and a
// RETURNING row is produced as its row is inserted, so the order is the
// order the rows were sent in (stored checks the indexes and falls back to
// reading the rows if it ever were not).
const appendSQL = `WITH
req AS (SELECT r FROM unnest($1::int4[]) AS t(r)),
exp AS (SELECT * FROM unnest($2::int4[], $3::text[], $4::text[], $5::text[], $6::int8[])
        AS t(r, document_id, scope, branch, rev)),
cnd AS (SELECT * FROM unnest($7::int4[], $8::text[], $9::text[], $10::text[], $11::int8[])
        AS t(r, document_id, scope, branch, rev)),
jb AS (SELECT * FROM unnest($12::int4[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[])
       AS t(r, job_id, document_id, status, streams, token, error_history)),
bad AS (
    SELECT e.r FROM exp AS e
    WHERE coalesce((SELECT o.idx + 1 FROM operations AS o
                    WHERE o.document_id = e.document_id AND o.scope = e.scope AND o.branch = e.branch
                    ORDER BY o.idx DESC LIMIT 1), 0) <> e.rev
    UNION ALL
    SELECT c.r FROM cnd AS c
    WHERE coalesce((SELECT o.idx + 1 FROM operations AS o
                    WHERE o.document_id = c.document_id AND o.scope = c.scope AND o.branch = c.branch
                    ORDER BY o.idx DESC LIMIT 1), 0) > c.rev
    UNION ALL
    SELECT j.r FROM jb AS j WHERE EXISTS (SELECT 1 FROM jobs AS x WHERE x.job_id = j.job_id)
),
ok AS (SELECT r FROM req WHERE r NOT IN (SELECT r FROM bad)),
oks AS (SELECT coalesce(array_agg(r), '{}') AS a FROM ok),
ins_ops AS (
    INSERT INTO operations (document_id, scope, branch, idx, skip, op_id, job_id, document_type,
                            model_version, hash, ts_utc_ms, action_id, action)
    SELECT ($3::text[])[o.s], ($4::text[])[o.s], ($5::text[])[o.s], o.idx, o.skip, o.op_id,
           ($13::text[])[o.j], ($38::text[])[o.s], o.model_version, o.hash, o.ts, o.action_id, o.action::json
    FROM unnest($19::int4[], $20::int4[], $21::int8[], $22::int8[], $23::text[],
                $24::int4[], $25::text[], $26::int8[], $27::text[], $28::text[])
         AS o(s, j, idx, skip, op_id, model_version, hash, ts, action_id, action)
    WHERE ($2::int4[])[o.s] = ANY ((SELECT a FROM oks)::int4[])
    RETURNING idx, ordinal
),
ins_jobs AS (
    INSERT INTO jobs (job_id, document_id, status, streams, token, error_history)
    SELECT j.job_id, j.document_id, j.status, j.streams::json, j.token::json, j.error_history::json
    FROM jb AS j WHERE j.r IN (SELECT r FROM ok)
),
ins_kf AS (
    INSERT INTO keyframes (document_id, scope, branch, idx, document_type, model_version, state, hash)
    SELECT k.document_id, k.scope, k.branch, k.idx, k.document_type, k.model_version, k.state::json, k.hash
    FROM unnest($29::int4[], $30::text[], $31::text[], $32::text[], $33::int8[], $34::text[], $35::int4[],
                $36::text[], $37::text[])
         AS k(r, document_id, scope, branch, idx, document_type, model_version, state, hash)
    WHERE k.r IN (SELECT r FROM ok)
    ON CONFLICT (document_id, scope, branch, idx) DO UPDATE
    SET document_type = excluded.document_type, model_version = excluded.model_version,
        state = excluded.state, hash = excluded.hash, created_at = now()
)
SELECT r, NULL::int8, NULL::int8 FROM ok
UNION ALL
SELECT NULL, idx, ordinal FROM ins_ops`

// hotPathSQL sets how the append transaction's statements are planned:
// always with their cached generic plan (a custom plan per call costs more
// than the insert of a small batch, and their plans do not depend on the
// array arguments), and never with a sequential scan (pgtx.NoSeqScan: a
// generic plan cached while a table was small would otherwise stay one).
const hotPathSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), ` + pgtx.NoSeqScan

// txSQL reads what the batch's rows share: the transaction id and its start.
const txSQL = `SELECT coalesce(pg_current_xact_id_if_assigned()::text, '0'), now()`

// appendArgs is the columnar form of a batch for appendSQL. An operation
// names its stream and job by their 1-based position in the stream and job
// arrays, so the strings they share are sent once per stream and job rather
// than once per operation: encoding them is most of the batch's client cost.
type appendArgs struct {
	reqs []int32

	eReq                    []int32
	eDoc, eScope, eBranch   []string
	eType                   []string
	eRev                    []int64
	cReq                    []int32
	cDoc, cScope, cBranch   []string
	cRev                    []int64
	jReq                    []int32
	jID, jDoc, jStatus      []string
	jStreams, jToken, jErrs []string
	oStream, oJob           []int32
	oIdx, oSkip             []int64
	oOpID                   []string
	oVersion                []int32
	oHash                   []string
	oTS                     []int64
	oActionID, oAction      []string
	kReq                    []int32
	kDoc, kScope, kBranch   []string
	kIdx                    []int64
	kType                   []string
	kVersion                []int32
	kState, kHash           []string
}

func (a *appendArgs) add(p *plan) {
	r := int32(p.pos)
	a.reqs = append(a.reqs, r)
	// Jobs first: operations refer to them by position.
	jobBase := int32(len(a.jID))
	jobNo := make(map[string]int32, len(p.jobs))
	for i := range p.jobs {
		j := &p.jobs[i]
		jobNo[j.JobID] = jobBase + int32(i) + 1
		a.jReq = append(a.jReq, r)
		a.jID = append(a.jID, j.JobID)
		a.jDoc = append(a.jDoc, j.DocumentID)
		a.jStatus = append(a.jStatus, string(j.Status))
		a.jStreams = append(a.jStreams, p.jobJSON[i][0])
		a.jToken = append(a.jToken, p.jobJSON[i][1])
		a.jErrs = append(a.jErrs, p.jobJSON[i][2])
	}
	ai := 0
	for _, sa := range p.req.Streams {
		a.eReq = append(a.eReq, r)
		a.eDoc = append(a.eDoc, sa.Stream.DocumentID)
		a.eScope = append(a.eScope, sa.Stream.Scope)
		a.eBranch = append(a.eBranch, sa.Stream.Branch)
		a.eRev = append(a.eRev, sa.ExpectedRevision)
		streamNo := int32(len(a.eReq))
		docType := p.req.DocumentType
		for i := range sa.Operations {
			op := &sa.Operations[i]
			if op.DocumentType != "" {
				docType = op.DocumentType
			}
			a.oStream = append(a.oStream, streamNo)
			a.oJob = append(a.oJob, jobNo[op.JobID])
			a.oIdx = append(a.oIdx, op.Index)
			a.oSkip = append(a.oSkip, op.Skip)
			a.oOpID = append(a.oOpID, op.OpID)
			a.oVersion = append(a.oVersion, int32(op.Version))
			a.oHash = append(a.oHash, op.Hash)
			a.oTS = append(a.oTS, op.TimestampUtcMs)
			a.oActionID = append(a.oActionID, op.Action.ID)
			a.oAction = append(a.oAction, p.actions[ai])
			ai++
		}
		a.eType = append(a.eType, docType)
	}
	if p.req.Condition != nil {
		for _, c := range p.req.Condition.Streams {
			a.cReq = append(a.cReq, r)
			a.cDoc = append(a.cDoc, c.Stream.DocumentID)
			a.cScope = append(a.cScope, c.Stream.Scope)
			a.cBranch = append(a.cBranch, c.Stream.Branch)
			a.cRev = append(a.cRev, c.Revision)
		}
	}
	for _, kf := range p.req.Keyframes {
		a.kReq = append(a.kReq, r)
		a.kDoc = append(a.kDoc, kf.Stream.DocumentID)
		a.kScope = append(a.kScope, kf.Stream.Scope)
		a.kBranch = append(a.kBranch, kf.Stream.Branch)
		a.kIdx = append(a.kIdx, kf.Index)
		docType := kf.DocumentType
		if docType == "" {
			docType = p.req.DocumentType
		}
		a.kType = append(a.kType, docType)
		a.kVersion = append(a.kVersion, int32(kf.Version))
		a.kState = append(a.kState, string(kf.State))
		a.kHash = append(a.kHash, kf.Hash)
	}
}

// columnar lays plans out as arrays and lists the streams to lock.
func columnar(plans []*plan) (*appendArgs, []string) {
	args := &appendArgs{}
	var keys []string
	for _, p := range plans {
		args.add(p)
		keys = p.lockKeys(keys)
	}
	return args, keys
}

// values are the statement's arguments; the numbers are their placeholders
// in appendSQL.
func (a *appendArgs) values() []any {
	return []any{
		a.reqs,                                      // $1
		a.eReq, a.eDoc, a.eScope, a.eBranch, a.eRev, // $2-$6
		a.cReq, a.cDoc, a.cScope, a.cBranch, a.cRev, // $7-$11
		a.jReq, a.jID, a.jDoc, a.jStatus, a.jStreams, a.jToken, a.jErrs, // $12-$18
		a.oStream, a.oJob, a.oIdx, a.oSkip, a.oOpID, // $19-$23
		a.oVersion, a.oHash, a.oTS, a.oActionID, a.oAction, // $24-$28
		a.kReq, a.kDoc, a.kScope, a.kBranch, a.kIdx, a.kType, a.kVersion, a.kState, a.kHash, // $29-$37
		a.eType, // $38
	}
}

// landed is what appendSQL reports for one transaction.
type landed struct {
	ok        map[int]bool
	rows      []insertedRow // in insertion order
	next      int           // the first row stored has not consumed
	txid      uint64
	writtenAt time.Time
	raised    map[int]error // requests whose statement raised (one-by-one path)
}

type insertedRow struct{ idx, ordinal int64 }

func newLanded() *landed {
	return &landed{ok: map[int]bool{}, raised: map[int]error{}}
}

func (l *landed) scan(rows pgx.Rows) error {
	for rows.Next() {
		var (
			r            *int32
			idx, ordinal *int64
		)
		if err := rows.Scan(&r, &idx, &ordinal); err != nil {
			return err
		}
		if r != nil {
			l.ok[int(*r)] = true
			continue
		}
		l.rows = append(l.rows, insertedRow{*idx, *ordinal})
	}
	return rows.Err()
}

func (l *landed) scanTx(row pgx.Row) error {
	var txid string
	if err := row.Scan(&txid, &l.writtenAt); err != nil {
		return err
	}
	v, err := strconv.ParseUint(txid, 10, 64)
	if err != nil {
		return fmt.Errorf("parsing transaction id %q: %w", txid, err)
	}
	l.txid = v
	return nil
}

// Append implements log.Store.
func (s *Store) Append(ctx context.Context, reqs []oplog.AppendRequest) (_ []oplog.AppendResult, err error) {
	defer markUnavailable(&err)
	results := make([]oplog.AppendResult, len(reqs))
	plans := make([]*plan, 0, len(reqs))
	for i := range reqs {
		results[i].DocumentID = reqs[i].DocumentID
		p, err := planRequest(i, &reqs[i])
		if err == nil {
			err = checkBranchRef(&reqs[i])
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		plans = append(plans, p)
	}
	if len(plans) == 0 {
		return results, nil
	}

	var l *landed
	if independent(plans) && !hasBranchRefs(plans) {
		write := s.appendPipelined
		if s.copyMin > 0 && countOperations(plans) >= s.copyMin {
			write = s.appendCopy
		}
		l, err = write(ctx, plans)
		if err != nil && requestError(err) {
			l, err = s.appendOneByOne(ctx, plans)
		}
	} else {
		l, err = s.appendOneByOne(ctx, plans)
	}
	if err != nil {
		return nil, err
	}

	for _, p := range plans {
		res := &results[p.pos]
		if l.ok[p.pos] {
			var aligned bool
			res.Operations, res.Jobs, aligned = l.stored(p)
			if !aligned {
				if err := s.rereadOrdinals(ctx, res.Operations); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := s.diagnose(ctx, p, l.raised[p.pos], res); err != nil {
			return nil, err
		}
	}
	return results, nil
}

func countOperations(plans []*plan) int {
	n := 0
	for _, p := range plans {
		n += len(p.actions)
	}
	return n
}

// stored returns a landed plan's operations and job results as stored.
// Plans must be asked in the order they were sent: each consumes its rows
// from the inserted rows in turn. ok is false when the returned rows do not
// line up with the plan's operations; the caller then reads them back.
func (l *landed) stored(p *plan) (_ []oplog.Operation, _ []oplog.JobResult, ok bool) {
	n := 0
	for _, sa := range p.req.Streams {
		n += len(sa.Operations)
	}
	ok = true
	ops := make([]oplog.Operation, 0, n)
	for _, sa := range p.req.Streams {
		for _, op := range sa.Operations {
			if l.next < len(l.rows) && l.rows[l.next].idx == op.Index {
				op.Ordinal = l.rows[l.next].ordinal
			} else {
				ok = false
			}
			l.next++
			op.TxID = l.txid
			op.WrittenAt = l.writtenAt
			if op.DocumentType == "" {
				op.DocumentType = p.req.DocumentType
			}
			ops = append(ops, op)
		}
	}
	jobs := make([]oplog.JobResult, len(p.jobs))
	for i, j := range p.jobs {
		j.CreatedAt = l.writtenAt
		jobs[i] = j
	}
	return ops, jobs, ok
}

// rereadOrdinals fills ops' ordinals from the stored rows, for the case the
// insert's returned rows could not be lined up with them.
func (s *Store) rereadOrdinals(ctx context.Context, ops []oplog.Operation) error {
	byStream := map[oplog.StreamKey][]*oplog.Operation{}
	for i := range ops {
		byStream[ops[i].Stream()] = append(byStream[ops[i].Stream()], &ops[i])
	}
	for k, list := range byStream {
		stored, err := s.ReadStream(ctx, k, list[0].Index, len(list))
		if err != nil {
			return fmt.Errorf("reading back the ordinals of %s: %w", k, err)
		}
		for i, op := range list {
			if i < len(stored) && stored[i].Index == op.Index {
				op.Ordinal = stored[i].Ordinal
			}
		}
	}
	return nil
}

// appendPipelined runs the whole batch as one round trip.
func (s *Store) appendPipelined(ctx context.Context, plans []*plan) (*landed, error) {
	args, keys := columnar(plans)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring a connection to append: %w", err)
	}
	defer conn.Release()

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(hotPathSQL)
	b.Queue(lockSQL, keys)
	b.Queue(appendSQL, args.values()...)
	b.Queue(txSQL)
	b.Queue("COMMIT")
	l := newLanded()
	br := conn.SendBatch(ctx, b)
	err = func() error {
		for range 3 { // BEGIN, the planner settings, lock
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if err := l.scan(rows); err != nil {
			return err
		}
		if err := l.scanTx(br.QueryRow()); err != nil {
			return err
		}
		_, err = br.Exec()
		return err
	}()
	closeErr := br.Close()
	if err == nil {
		err = closeErr
	}
	if err != nil {
		pgtx.Rollback(ctx, conn.Conn())
		return nil, fmt.Errorf("appending a batch of %d requests: %w", len(plans), err)
	}
	return l, nil
}

// appendOneByOne runs each request under its own savepoint, in batch order,
// so a request whose statement raises fails alone and each request's guard
// sees the requests before it.
func (s *Store) appendOneByOne(ctx context.Context, plans []*plan) (*landed, error) {
	var keys []string
	for _, p := range plans {
		keys = p.lockKeys(keys)
	}
	l := newLanded()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSQL, keys); err != nil {
			return fmt.Errorf("locking streams: %w", err)
		}
		for _, p := range plans {
			var args appendArgs
			args.add(p)
			err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
				rows, err := sp.Query(ctx, appendSQL, args.values()...)
				if err != nil {
					return err
				}
				mark := len(l.rows)
				if err := l.scan(rows); err != nil || p.req.Branch == nil || !l.ok[p.pos] {
					return err
				}
				if err := putBranch(ctx, sp, p.req.Branch); err != nil {
					// The savepoint undoes the request: forget it landed.
					l.rows = l.rows[:mark]
					delete(l.ok, p.pos)
					return err
				}
				return nil
			})
			if err != nil {
				if !requestError(err) {
					return fmt.Errorf("appending request for document %s: %w", p.req.DocumentID, err)
				}
				l.raised[p.pos] = err
			}
		}
		return l.scanTx(tx.QueryRow(ctx, txSQL))
	})
	if err != nil {
		return nil, fmt.Errorf("appending a batch of %d requests one by one: %w", len(plans), err)
	}
	return l, nil
}

// requestError reports whether err is a fault of one request's data
// (integrity or data exception) rather than of the connection or server.
func requestError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	class := pgErr.Code[:2]
	return class == "23" || class == "22"
}
