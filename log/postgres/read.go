package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	oplog "github.com/doclog/doclog/log"
)

// opColumns names the transaction id's text form txid_text: an output column
// named txid would be what a bare ORDER BY txid sorts by (an output column
// wins over an input column of the same name), in text order, where 1000
// comes before 999.
const opColumns = `ordinal, txid::text AS txid_text, document_id, scope, branch, idx, skip, op_id, job_id, document_type,
model_version, hash, ts_utc_ms, action, written_at`

func scanOperations(rows pgx.Rows, limitHint int) ([]oplog.Operation, error) {
	defer rows.Close()
	ops := make([]oplog.Operation, 0, max(limitHint, 0))
	for rows.Next() {
		var (
			op     oplog.Operation
			txid   string
			action []byte
		)
		if err := rows.Scan(&op.Ordinal, &txid, &op.DocumentID, &op.Scope, &op.Branch, &op.Index, &op.Skip,
			&op.OpID, &op.JobID, &op.DocumentType, &op.Version, &op.Hash, &op.TimestampUtcMs, &action, &op.WrittenAt); err != nil {
			return nil, fmt.Errorf("reading operations: %w", err)
		}
		v, err := strconv.ParseUint(txid, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reading operations: transaction id %q: %w", txid, err)
		}
		op.TxID = v
		if err := json.Unmarshal(action, &op.Action); err != nil {
			return nil, fmt.Errorf("decoding action of operation %s: %w", op.OpID, err)
		}
		ops = append(ops, op)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading operations: %w", err)
	}
	return ops, nil
}

// ReadStream implements log.Store.
func (s *Store) ReadStream(ctx context.Context, stream oplog.StreamKey, fromIndex int64, limit int) (_ []oplog.Operation, err error) {
	defer markUnavailable(&err)
	lim := any(nil)
	if limit > 0 {
		lim = limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+opColumns+` FROM operations
WHERE document_id = $1 AND scope = $2 AND branch = $3 AND idx >= $4
ORDER BY idx LIMIT $5`, stream.DocumentID, stream.Scope, stream.Branch, fromIndex, lim)
	if err != nil {
		return nil, fmt.Errorf("reading stream %s from index %d: %w", stream, fromIndex, err)
	}
	return scanOperations(rows, min(limit, 1024))
}

// cursor is the decoded form of a log.Cursor: the last row handed out.
type cursor struct {
	txid    uint64
	ordinal int64
}

func parseCursor(c oplog.Cursor) (cursor, error) {
	if c == "" {
		return cursor{}, nil
	}
	t, o, ok := strings.Cut(string(c), ".")
	if !ok {
		return cursor{}, fmt.Errorf("malformed tail cursor %q", c)
	}
	txid, err1 := strconv.ParseUint(t, 10, 64)
	ord, err2 := strconv.ParseInt(o, 10, 64)
	if err1 != nil || err2 != nil || ord < 0 {
		return cursor{}, fmt.Errorf("malformed tail cursor %q", c)
	}
	return cursor{txid: txid, ordinal: ord}, nil
}

func (c cursor) String() oplog.Cursor {
	return oplog.Cursor(strconv.FormatUint(c.txid, 10) + "." + strconv.FormatInt(c.ordinal, 10))
}

// tailFrom is the tail's page after a cursor ($1, $2), $3 rows at most. The
// bound and the rows come from one statement, so from one snapshot: every
// transaction below its xmin has ended, and each one's rows are either all
// visible to that snapshot or never will be (docs/log.md, "Why the tail
// skips nothing"). The order is the table's xid8 column, qualified: the
// cursor is the page's last row, so a page in any other order (text order
// puts 1000 before 999) hands out a cursor past rows it did not return.
const tailFrom = ` FROM operations AS o
WHERE (o.txid, o.ordinal) > ($1::text::xid8, $2::int8)
  AND o.txid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY o.txid, o.ordinal LIMIT $3`

const tailSQL = `SELECT ` + opColumns + tailFrom

// Tail implements log.Store. Rows are returned in (txid, ordinal) order and
// only when their transaction is below the oldest transaction still running:
// every row that can still commit sorts after the cursor handed out.
func (s *Store) Tail(ctx context.Context, after oplog.Cursor, limit int) (_ oplog.TailPage, err error) {
	defer markUnavailable(&err)
	c, err := parseCursor(after)
	if err != nil {
		return oplog.TailPage{}, err
	}
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.pool.Query(ctx, tailSQL, strconv.FormatUint(c.txid, 10), c.ordinal, limit)
	if err != nil {
		return oplog.TailPage{}, fmt.Errorf("reading the log tail after %q: %w", after, err)
	}
	ops, err := scanOperations(rows, limit)
	if err != nil {
		return oplog.TailPage{}, err
	}
	page := oplog.TailPage{Operations: ops, Next: after}
	if n := len(ops); n > 0 {
		page.Next = cursor{txid: ops[n-1].TxID, ordinal: ops[n-1].Ordinal}.String()
	}
	return page, nil
}

// tailEndSQL reads the horizon and the last row below it from one
// snapshot, the last row by a backward scan of the (txid, ordinal) index.
const tailEndSQL = `SELECT pg_snapshot_xmin(s.snap)::text,
       coalesce((SELECT o.txid::text FROM operations AS o
                 WHERE o.txid < pg_snapshot_xmin(s.snap)
                 ORDER BY o.txid DESC, o.ordinal DESC LIMIT 1), '0')
FROM (SELECT pg_current_snapshot() AS snap) AS s`

// TailEnd implements log.Store.
func (s *Store) TailEnd(ctx context.Context) (_ oplog.TailEnd, err error) {
	defer markUnavailable(&err)
	var horizon, last string
	if err := s.pool.QueryRow(ctx, tailEndSQL).Scan(&horizon, &last); err != nil {
		return oplog.TailEnd{}, fmt.Errorf("reading the end of the log tail: %w", err)
	}
	h, err1 := strconv.ParseUint(horizon, 10, 64)
	l, err2 := strconv.ParseUint(last, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return oplog.TailEnd{}, fmt.Errorf("reading the end of the log tail: %w", err)
	}
	return oplog.TailEnd{Horizon: h, Last: l}, nil
}

// CursorBefore implements log.Store: ordinals start at 1, so (txid, 0)
// sorts before every row of txid and after every row of the transactions
// before it.
func (s *Store) CursorBefore(txid uint64) oplog.Cursor {
	return cursor{txid: txid}.String()
}

// Revisions implements log.Store.
func (s *Store) Revisions(ctx context.Context, documentID, branch string) (_ oplog.Revisions, err error) {
	defer markUnavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT scope, max(idx) + 1, max(ts_utc_ms) FROM operations
WHERE document_id = $1 AND branch = $2 GROUP BY scope`, documentID, branch)
	if err != nil {
		return oplog.Revisions{}, fmt.Errorf("reading revisions of %s on %s: %w", documentID, branch, err)
	}
	defer rows.Close()
	out := oplog.Revisions{Revision: map[string]int64{}}
	for rows.Next() {
		var scope string
		var rev, ts int64
		if err := rows.Scan(&scope, &rev, &ts); err != nil {
			return oplog.Revisions{}, fmt.Errorf("reading revisions of %s: %w", documentID, err)
		}
		out.Revision[scope] = rev
		out.LatestTimestamp = max(out.LatestTimestamp, ts)
	}
	if err := rows.Err(); err != nil {
		return oplog.Revisions{}, fmt.Errorf("reading revisions of %s: %w", documentID, err)
	}
	return out, nil
}

// headsOfDocumentsSQL finds each document's streams with a loose index scan
// of the primary key — one probe per stream for the next (scope, branch)
// after the last, one for its last index — so its cost follows the number of
// streams, never the number of operations.
const headsOfDocumentsSQL = `WITH RECURSIVE st(d, scope, branch) AS (
    SELECT f.document_id, f.scope, f.branch
    FROM unnest($1::text[]) AS u(d)
    CROSS JOIN LATERAL (SELECT o.document_id, o.scope, o.branch FROM operations AS o
                        WHERE o.document_id = u.d ORDER BY o.scope, o.branch LIMIT 1) AS f
    UNION ALL
    SELECT n.document_id, n.scope, n.branch
    FROM st CROSS JOIN LATERAL (SELECT o.document_id, o.scope, o.branch FROM operations AS o
                                WHERE o.document_id = st.d AND (o.scope, o.branch) > (st.scope, st.branch)
                                ORDER BY o.scope, o.branch LIMIT 1) AS n
)
SELECT st.d, st.scope, st.branch,
       (SELECT o.idx + 1 FROM operations AS o
        WHERE o.document_id = st.d AND o.scope = st.scope AND o.branch = st.branch
        ORDER BY o.idx DESC LIMIT 1)
FROM st`

// Heads implements log.Store.
func (s *Store) Heads(ctx context.Context, documentIDs []string) (_ map[oplog.StreamKey]int64, err error) {
	defer markUnavailable(&err)
	out := make(map[oplog.StreamKey]int64)
	if len(documentIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, headsOfDocumentsSQL, documentIDs)
	if err != nil {
		return nil, fmt.Errorf("reading the stream heads of %d documents: %w", len(documentIDs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var k oplog.StreamKey
		var rev int64
		if err := rows.Scan(&k.DocumentID, &k.Scope, &k.Branch, &rev); err != nil {
			return nil, fmt.Errorf("reading the stream heads of %d documents: %w", len(documentIDs), err)
		}
		out[k] = rev
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the stream heads of %d documents: %w", len(documentIDs), err)
	}
	return out, nil
}

// headsSQL reads each stream's revision (its last index + 1, or 0), in the
// order the streams were given.
const headsSQL = `SELECT coalesce((SELECT o.idx + 1 FROM operations AS o
                 WHERE o.document_id = s.d AND o.scope = s.sc AND o.branch = s.b
                 ORDER BY o.idx DESC LIMIT 1), 0)
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS s(d, sc, b, n)
ORDER BY s.n`

// collectHeads reads headsSQL's answer for n streams.
func collectHeads(rows pgx.Rows, n int) ([]int64, error) {
	heads, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("reading stream heads: %w", err)
	}
	if len(heads) != n {
		return nil, fmt.Errorf("reading stream heads: %d heads for %d streams", len(heads), n)
	}
	return heads, nil
}

// streamHeads returns the revision of each stream (0 for an empty one).
func (s *Store) streamHeads(ctx context.Context, streams []oplog.StreamKey) (map[oplog.StreamKey]int64, error) {
	docs, scopes, branches := make([]string, len(streams)), make([]string, len(streams)), make([]string, len(streams))
	for i, k := range streams {
		docs[i], scopes[i], branches[i] = k.DocumentID, k.Scope, k.Branch
	}
	rows, err := s.pool.Query(ctx, headsSQL, docs, scopes, branches)
	if err != nil {
		return nil, fmt.Errorf("reading stream heads: %w", err)
	}
	heads, err := collectHeads(rows, len(streams))
	if err != nil {
		return nil, err
	}
	out := make(map[oplog.StreamKey]int64, len(streams))
	for i, k := range streams {
		out[k] = heads[i]
	}
	return out, nil
}

// StreamLatestTimestamp implements log.Store.
func (s *Store) StreamLatestTimestamp(ctx context.Context, stream oplog.StreamKey) (_ int64, _ bool, err error) {
	defer markUnavailable(&err)
	var ts *int64
	err = s.pool.QueryRow(ctx, `SELECT max(ts_utc_ms) FROM operations
WHERE document_id = $1 AND scope = $2 AND branch = $3`, stream.DocumentID, stream.Scope, stream.Branch).Scan(&ts)
	if err != nil {
		return 0, false, fmt.Errorf("reading latest timestamp of %s: %w", stream, err)
	}
	if ts == nil {
		return 0, false, nil
	}
	return *ts, true, nil
}

// ListDocuments implements log.Store with a loose index scan over the
// primary key, so paging costs one index probe per document and the log needs
// no separate documents table on its write path.
func (s *Store) ListDocuments(ctx context.Context, after string, limit int) (_ oplog.DocumentPage, err error) {
	defer markUnavailable(&err)
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `WITH RECURSIVE d(id) AS (
    (SELECT document_id FROM operations WHERE document_id > $1 ORDER BY document_id LIMIT 1)
    UNION ALL
    SELECT (SELECT o.document_id FROM operations AS o WHERE o.document_id > d.id ORDER BY o.document_id LIMIT 1)
    FROM d WHERE d.id IS NOT NULL
)
SELECT id FROM d WHERE id IS NOT NULL LIMIT $2`, after, limit)
	if err != nil {
		return oplog.DocumentPage{}, fmt.Errorf("listing documents after %q: %w", after, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return oplog.DocumentPage{}, fmt.Errorf("listing documents after %q: %w", after, err)
	}
	page := oplog.DocumentPage{DocumentIDs: ids}
	if len(ids) == limit {
		page.Next = ids[len(ids)-1]
	}
	return page, nil
}

// JobResults implements log.Store.
func (s *Store) JobResults(ctx context.Context, jobIDs []string) (_ map[string]oplog.JobResult, err error) {
	defer markUnavailable(&err)
	out := make(map[string]oplog.JobResult, len(jobIDs))
	if len(jobIDs) == 0 {
		return out, nil
	}
	// Planned for each call (an unnamed statement): a plan cached while the
	// jobs table was small scans it sequentially (see pgtx.NoSeqScan), and this
	// lookup runs outside the append transaction that could set the
	// planner up.
	rows, err := s.pool.Query(ctx, `SELECT job_id, document_id, status, streams, token, error_history, created_at
FROM jobs WHERE job_id = ANY($1::text[])`, pgx.QueryExecModeExec, jobIDs)
	if err != nil {
		return nil, fmt.Errorf("reading results of %d jobs: %w", len(jobIDs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r                    oplog.JobResult
			status               string
			streams, token, errs []byte
		)
		if err := rows.Scan(&r.JobID, &r.DocumentID, &status, &streams, &token, &errs, &r.CreatedAt); err != nil {
			return nil, fmt.Errorf("reading job results: %w", err)
		}
		r.Status = oplog.JobStatus(status)
		var tok storedToken
		if err := decodeJSONColumns(r.JobID, streams, &r.Streams, token, &tok, errs, &r.ErrorHistory); err != nil {
			return nil, err
		}
		r.Token.Coordinates, r.Load = tok.Coordinates, tok.Load
		out[r.JobID] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading job results: %w", err)
	}
	return out, nil
}

func decodeJSONColumns(jobID string, pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		b := pairs[i].([]byte)
		if len(b) == 0 {
			continue
		}
		if err := json.Unmarshal(b, pairs[i+1]); err != nil {
			return fmt.Errorf("decoding result of job %s: %w", jobID, err)
		}
	}
	return nil
}

// HeldBefore returns, for each of opIDs the stream holds at an index below
// before, those indexes in order: what a placement that reads only the end
// of a long stream asks of the part it does not read (executor/place). The
// identity index (op_id first) finds them without reading the stream.
func (s *Store) HeldBefore(ctx context.Context, stream oplog.StreamKey, before int64, opIDs []string) (_ map[string][]int64, err error) {
	defer markUnavailable(&err)
	out := map[string][]int64{}
	if len(opIDs) == 0 || before <= 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT op_id, idx FROM operations
WHERE op_id = ANY($4::text[]) AND document_id = $1 AND scope = $2 AND branch = $3 AND idx < $5
ORDER BY idx`, stream.DocumentID, stream.Scope, stream.Branch, opIDs, before)
	if err != nil {
		return nil, fmt.Errorf("looking up operations of %s below index %d: %w", stream, before, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var idx int64
		if err := rows.Scan(&id, &idx); err != nil {
			return nil, fmt.Errorf("looking up operations of %s below index %d: %w", stream, before, err)
		}
		out[id] = append(out[id], idx)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("looking up operations of %s below index %d: %w", stream, before, err)
	}
	return out, nil
}
