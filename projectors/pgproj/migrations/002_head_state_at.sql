-- The runner stores a large state only every so often: these name the
-- earlier head the stored state is the state after, when it is older than
-- the head (the runner replays the log from it); NULL when it is the
-- head's own.
ALTER TABLE projector_streams
    ADD COLUMN state_index   bigint,
    ADD COLUMN state_hash    text,
    ADD COLUMN state_version integer;
