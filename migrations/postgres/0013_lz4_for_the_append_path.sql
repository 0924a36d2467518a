-- lz4 for the columns an append or a checkpoint writes, as 0012 set it for summaries and
-- verdicts. Postgres compresses a value when its row passes about 2 kB: every search block
-- (about 6 kB, kept inline), a long turn, a checkpoint's candidates and reasons; with the
-- server's default, pglz, that was about a tenth of Postgres's CPU per appended turn (21-22 ->
-- 19 us measured with lz4, docs/performance.md). Values already stored keep pglz (both are
-- read). Partitions are altered with their table: a partitioned table's setting reaches only
-- the partitions created after it, so 0012's summaries and verdicts are set again here for a
-- database partitioned before it ran. A server built without lz4 keeps pglz.
DO $$
DECLARE
    target record;
BEGIN
    FOR target IN
        SELECT c.oid::regclass AS rel, cols.list
        FROM (VALUES
            ('turns', ARRAY['content', 'anchors', 'profile']),
            ('search_blocks', ARRAY['keys', 'masks', 'roles', 'tokens']),
            ('term_counts', ARRAY['counts']),
            ('checkpoints', ARRAY['covered', 'uncovered', 'not_compacted', 'candidates_used',
                                  'reasons', 'summary', 'verdict'])
        ) AS cols(tab, list)
        JOIN pg_class c ON c.oid = cols.tab::regclass
            OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = cols.tab::regclass)
    LOOP
        EXECUTE format('ALTER TABLE %s %s', target.rel, (
            SELECT string_agg(format('ALTER COLUMN %I SET COMPRESSION lz4', col), ', ')
            FROM unnest(target.list) AS col));
    END LOOP;
EXCEPTION WHEN feature_not_supported THEN
    NULL;
END
$$;
