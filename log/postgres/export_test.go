package postgres

// HotPathSQL is hotPathSQL, for the plan tests.
const HotPathSQL = hotPathSQL

// TailSQL is the tail's statement, for its plan and ordering tests.
const TailSQL = tailSQL

// TailWitnessSQL is the tail's statement with, beside each row, the row's
// xmin and the statement's own snapshot, for the gap-safety stress test's
// record of what each page saw. The snapshot also comes on one row of its
// own, so an empty page reports it too.
const TailWitnessSQL = `SELECT pg_current_snapshot()::text, coalesce(txid_current_if_assigned()::text, ''),
       p.txid_text, p.ordinal, p.document_id, p.scope, p.branch, p.idx, p.op_id, p.row_xmin
FROM (VALUES (1)) AS one(x)
LEFT JOIN LATERAL (SELECT o.txid::text AS txid_text, o.ordinal, o.document_id, o.scope, o.branch, o.idx, o.op_id, o.xmin::text AS row_xmin` +
	tailFrom + `) AS p ON true`
