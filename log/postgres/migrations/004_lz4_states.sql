-- A state past about 2 KB is compressed as it is stored (TOAST), and the
-- default method, pglz, cost the server about 2.5 ms of CPU per megabyte of
-- canonical JSON written; lz4 costs a fraction of that and compresses it
-- about as well (docs/benchmarks.md, "Compression of large states"). The
-- column's method applies to values written from now on; values already
-- stored are read as they were written. A server built without lz4 keeps
-- the default.
DO $$
BEGIN
    ALTER TABLE keyframes ALTER COLUMN state SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available on this server: keyframes.state keeps the default compression';
END
$$;
