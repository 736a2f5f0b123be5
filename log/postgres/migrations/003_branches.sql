-- The branch registry: one row per document branch that a fork created or a
-- promote or delete-branch job changed. A branch with operations and no row
-- is a live branch without lineage (main, and every branch written before
-- the registry existed). Rows are written only by the append that commits
-- the job making the change, in its transaction.
CREATE TABLE branches (
    document_id  text COLLATE "C" NOT NULL,
    branch       text COLLATE "C" NOT NULL,
    -- The branch it was forked from; '' when it was not forked.
    base         text COLLATE "C" NOT NULL DEFAULT '',
    -- Per scope: the fork point, and the two revisions at which this branch
    -- and its base last held the same state (JSON objects scope → revision).
    fork_point   json        NOT NULL DEFAULT '{}',
    base_point   json        NOT NULL DEFAULT '{}',
    own_point    json        NOT NULL DEFAULT '{}',
    deleted      boolean     NOT NULL DEFAULT false,
    job_id       text        NOT NULL DEFAULT '',
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, branch)
);
