-- The document view: one row per stream (document, scope, branch) with the
-- scope's state and the index and hash of its last operation. The document
-- header (type, name, slug, creation, deletion) lives on the row of the
-- document scope; version and revision per scope are read across the rows.
CREATE TABLE document_snapshots (
    document_id          text COLLATE "C" NOT NULL,
    branch               text COLLATE "C" NOT NULL,
    scope                text COLLATE "C" NOT NULL,
    document_type        text NOT NULL,
    model_version        integer NOT NULL,
    state                json NOT NULL,
    last_index           bigint NOT NULL,
    last_hash            text NOT NULL,
    last_modified_utc_ms bigint NOT NULL,
    name                 text,
    slug                 text,
    created_at_utc_ms    bigint,
    is_deleted           boolean NOT NULL DEFAULT false,
    deleted_at_utc_ms    bigint,
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, branch, scope)
);

-- Which document holds a slug. A row is only ever deleted by its own live
-- document moving to another slug, so a deleted document keeps its slug for
-- good and a live document's slug is never taken by another.
CREATE TABLE slug_mappings (
    slug        text COLLATE "C" NOT NULL,
    branch      text COLLATE "C" NOT NULL,
    document_id text COLLATE "C" NOT NULL,
    claimed_at  bigint NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (slug, branch)
);
CREATE INDEX slug_mappings_document ON slug_mappings (document_id, branch);
