-- Pauses an operator set on the executor group (doclogctl jobs pause): a
-- partition of the jobs topic ('partition:N') or a document type ('type:T').
-- Every member reads the table before its first batch and every few seconds,
-- and applies none of the jobs a pause covers until it is lifted.
CREATE TABLE executor_pauses (
    target     text COLLATE "C" PRIMARY KEY,
    reason     text        NOT NULL DEFAULT '',
    paused_at  timestamptz NOT NULL DEFAULT now()
);
