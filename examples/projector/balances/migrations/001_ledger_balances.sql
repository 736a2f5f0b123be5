-- One row per account of every doclog/ledger document, on every branch, as
-- the document's global state holds it after the operation at last_index.
CREATE TABLE ledger_balances (
    document_id text COLLATE "C" NOT NULL,
    branch      text COLLATE "C" NOT NULL,
    account_id  text COLLATE "C" NOT NULL,
    name        text NOT NULL,
    balance     bigint NOT NULL,
    closed      boolean NOT NULL,
    last_index  bigint NOT NULL,
    PRIMARY KEY (document_id, branch, account_id)
);
