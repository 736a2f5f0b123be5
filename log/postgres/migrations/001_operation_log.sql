-- The operation log: one row per operation, contiguous indexes per stream.
-- Every key leads with document_id so the log can later be hash-partitioned
-- by document. COLLATE "C" gives code-point order for ListDocuments paging.
CREATE TABLE operations (
    ordinal        bigint GENERATED ALWAYS AS IDENTITY,
    -- The inserting transaction: the tail pages in (txid, ordinal) order and
    -- only below the oldest running transaction, so it never skips a row.
    txid           xid8        NOT NULL DEFAULT pg_current_xact_id(),
    document_id    text COLLATE "C" NOT NULL,
    scope          text COLLATE "C" NOT NULL,
    branch         text COLLATE "C" NOT NULL,
    idx            bigint      NOT NULL CHECK (idx >= 0),
    skip           bigint      NOT NULL DEFAULT 0 CHECK (skip >= 0 AND skip <= idx),
    op_id          text        NOT NULL CHECK (op_id <> ''),
    job_id         text        NOT NULL CHECK (job_id <> ''),
    document_type  text        NOT NULL,
    model_version  integer     NOT NULL,
    hash           text        NOT NULL,
    ts_utc_ms      bigint      NOT NULL,
    action_id      text        NOT NULL CHECK (action_id <> ''),
    action         json        NOT NULL,
    written_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, scope, branch, idx)
);

-- An operation's identity. The same opId may recur in its own stream at a new
-- index or skip (reshuffle, undo), never as the same triple anywhere else.
CREATE UNIQUE INDEX operations_identity ON operations (op_id, idx, skip);
CREATE INDEX operations_tail ON operations (txid, ordinal);

-- Periodic snapshots of a stream's state, labelled by the index of the last
-- operation they include.
CREATE TABLE keyframes (
    document_id    text COLLATE "C" NOT NULL,
    scope          text COLLATE "C" NOT NULL,
    branch         text COLLATE "C" NOT NULL,
    idx            bigint      NOT NULL CHECK (idx >= 0),
    document_type  text        NOT NULL,
    model_version  integer     NOT NULL,
    state          json        NOT NULL,
    hash           text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, scope, branch, idx)
);

-- One result per job, written in the transaction that wrote its operations
-- (WRITE_READY) or its failure (FAILED). A job with a row is never applied
-- again.
CREATE TABLE jobs (
    job_id         text PRIMARY KEY,
    document_id    text COLLATE "C" NOT NULL,
    status         text        NOT NULL CHECK (status IN ('WRITE_READY', 'FAILED')),
    streams        json        NOT NULL,
    token          json        NOT NULL,
    error_history  json        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Retention expires results by age.
CREATE INDEX jobs_created_at ON jobs (created_at);
