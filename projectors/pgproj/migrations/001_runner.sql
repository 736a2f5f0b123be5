-- The projector runner's tables. Projection tables belong to each projector's
-- own migrations; these are shared by all of them and keyed by projector name.

-- One row per (projector, partition): the next offset to consume and the
-- epoch of the member that owns the partition. A batch locks its row, checks
-- the epoch and moves next_offset in the transaction that writes the
-- projection, so a member left behind by a rebalance writes nothing.
CREATE TABLE projector_checkpoints (
    projector   text COLLATE "C" NOT NULL,
    partition   integer NOT NULL,
    next_offset bigint NOT NULL DEFAULT -1,
    epoch       bigint NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projector, partition)
);

-- The verified head of every stream a projector follows: the state every
-- next operation is recomputed from and checked against.
CREATE TABLE projector_streams (
    projector      text COLLATE "C" NOT NULL,
    document_id    text COLLATE "C" NOT NULL,
    scope          text COLLATE "C" NOT NULL,
    branch         text COLLATE "C" NOT NULL,
    document_type  text NOT NULL,
    last_index     bigint NOT NULL,
    hash           text NOT NULL,
    model_version  integer NOT NULL,
    -- json, not jsonb: the canonical text is kept as written, and jsonb
    -- refuses some strings a state may hold (\u0000).
    state          json NOT NULL,
    last_ts_utc_ms bigint NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projector, document_id, scope, branch)
);

-- Streams a projector stopped applying: an operation could not be applied or
-- its recomputed hash disagreed with the log. Deleting the row lifts it.
CREATE TABLE quarantined_streams (
    projector      text COLLATE "C" NOT NULL,
    document_id    text COLLATE "C" NOT NULL,
    scope          text COLLATE "C" NOT NULL,
    branch         text COLLATE "C" NOT NULL,
    idx            bigint NOT NULL,
    error_name     text NOT NULL,
    reason         text NOT NULL,
    quarantined_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projector, document_id, scope, branch)
);
