-- A checkpoint's verdict kept as the JSON the service wrote, in bytea, where it was jsonb. A
-- 2,000-turn proposal's verdict is about 30 KB; as jsonb every insert parsed it and compressed it
-- with pglz (about 2 ms of the INSERT's 3.8 ms), for reads that only ever want it whole or, in
-- reconstruct, one turn's reason. That reason now has a column of its own: `reasons`, a byte per
-- turn of [from_id, to_id] (0 for a turn the verdict lists no reason for; otherwise the code of
-- the reason, see src/store/postgres/reasons.rs), read by position as `candidates_used` is.
ALTER TABLE checkpoints ADD COLUMN reasons bytea;
UPDATE checkpoints k SET reasons = (
    SELECT string_agg(
               set_byte('\x00'::bytea, 0, CASE r.reason
                   WHEN 'not_reported' THEN 1
                   WHEN 'anchor_missing' THEN 2
                   WHEN 'no_anchors' THEN 3
                   WHEN 'beyond_last_anchor' THEN 4
                   WHEN 'pinned' THEN 5
                   ELSE 0 END),
               ''::bytea ORDER BY g.id)
    FROM generate_series(k.from_id, k.to_id) AS g(id)
    LEFT JOIN jsonb_to_recordset(k.verdict -> 'turns') AS r(id bigint, reason text) ON r.id = g.id
);
ALTER TABLE checkpoints
    ALTER COLUMN verdict TYPE bytea USING convert_to(verdict::text, 'UTF8'),
    ALTER COLUMN reasons SET NOT NULL,
    ADD CONSTRAINT checkpoints_reasons_check CHECK (length(reasons) = to_id - from_id + 1);

-- The pointer set's shape, checked without building unions of the ranges: sorting a multirange
-- of a few hundred ranges for `covered + uncovered` made these two checks about 1 ms of the
-- INSERT. With the three sets disjoint (checks 1 and 2), they are within [from_id, to_id] and
-- their sizes add up to its size exactly when their union is it.
CREATE FUNCTION int8multirange_size(int8multirange) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (SELECT coalesce(sum(upper(r) - lower(r)), 0) FROM unnest($1) AS r);
ALTER TABLE checkpoints
    DROP CONSTRAINT checkpoints_check3,
    DROP CONSTRAINT checkpoints_check4,
    ADD CONSTRAINT checkpoints_ranges_check CHECK (
        int8range(from_id, advanced_to, '[]') @> range_merge(covered)
        AND int8range(from_id, advanced_to, '[]') @> range_merge(uncovered)
        AND int8range(from_id, to_id, '[]') @> range_merge(not_compacted)
        AND int8multirange_size(covered) + int8multirange_size(uncovered)
            + int8multirange_size(not_compacted) = to_id - from_id + 1
    );

-- lz4 compresses a summary or a verdict several times faster than pglz; a server built without
-- it keeps pglz.
DO $$
BEGIN
    ALTER TABLE checkpoints
        ALTER COLUMN summary SET COMPRESSION lz4,
        ALTER COLUMN verdict SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    NULL;
END
$$;
