-- The example projector's one table: operations applied per document type
-- and branch.
CREATE TABLE example_type_counts (
    document_type text NOT NULL,
    branch        text NOT NULL,
    operations    bigint NOT NULL,
    PRIMARY KEY (document_type, branch)
);
