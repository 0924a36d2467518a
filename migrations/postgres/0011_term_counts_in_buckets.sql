-- A conversation's candidate counts (rule 2b's rarity) in 64 rows of packed counts, where they
-- had a row per term: an append of 500 turns raised or started about 2,000 rows, a fifth of the
-- CPU Postgres spent on it; it now rewrites at most 64 small ones. `counts` holds, for the terms
-- whose key's top 6 bits are `bucket`, 8 bytes each (key, then count; big-endian), ordered by
-- key as an unsigned number (src/store/postgres/term_buckets.rs).
ALTER TABLE term_counts RENAME TO term_counts_by_term;
ALTER INDEX term_counts_pkey RENAME TO term_counts_by_term_pkey;
CREATE TABLE term_counts (
    tenant       text     NOT NULL,
    conversation text     NOT NULL,
    bucket       smallint NOT NULL CHECK (bucket BETWEEN 0 AND 63),
    counts       bytea    NOT NULL CHECK (length(counts) % 8 = 0),
    PRIMARY KEY (tenant, conversation, bucket)
);
INSERT INTO term_counts (tenant, conversation, bucket, counts)
SELECT tenant, conversation, ((term::bigint & 4294967295) >> 26)::smallint,
       string_agg(int4send(term) || int4send(turns), ''::bytea ORDER BY term::bigint & 4294967295)
FROM term_counts_by_term
GROUP BY 1, 2, 3;
DROP TABLE term_counts_by_term;
