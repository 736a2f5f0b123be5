-- The relationship index. documents has one row per document and branch,
-- from the document scope, with the index of the last operation applied, so
-- reads can honour consistency tokens. document_relationships holds the
-- links of ADD_RELATIONSHIP/REMOVE_RELATIONSHIP, keyed by source, type and
-- target, so applying an operation twice changes nothing.
CREATE TABLE documents (
    document_id       text COLLATE "C" NOT NULL,
    branch            text COLLATE "C" NOT NULL,
    document_type     text NOT NULL,
    created_at_utc_ms bigint NOT NULL,
    is_deleted        boolean NOT NULL DEFAULT false,
    deleted_at_utc_ms bigint,
    last_index        bigint NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, branch)
);
CREATE INDEX documents_by_type ON documents (document_type, branch, document_id);

CREATE TABLE document_relationships (
    source_id   text COLLATE "C" NOT NULL,
    branch      text COLLATE "C" NOT NULL,
    type        text COLLATE "C" NOT NULL,
    target_id   text COLLATE "C" NOT NULL,
    metadata    json,
    since_index bigint NOT NULL,
    PRIMARY KEY (source_id, branch, type, target_id)
);
CREATE INDEX document_relationships_incoming ON document_relationships (target_id, branch, type, source_id);
