-- The search index in blocks: a row per run of up to 64 consecutive turns of one append,
-- indexed under the union of their keys, where `turn_search` had a row per turn. Consecutive
-- turns share most of their terms (tau-bench: 32.5 keys a turn, 9.9 a turn in blocks of 64), so
-- GIN upkeep, most of what an append cost Postgres, falls by the same factor. Per key of `keys`
-- (sorted), `masks` says which of the block's turns hold it (bit i: turn first_turn + i);
-- `roles` (src/store/postgres/search.rs's codes) and `tokens` are per turn, what a hit needs.
-- Stored uncompressed in the row (MAIN, and a tuple target of a page; a block holds at most 512
-- keys, so it fits): compressing a block costs every append, and every search that reads it a
-- decompression (a read took 3× as long).
-- Whatever deletes a conversation's turns must delete its rows here too.
CREATE TABLE search_blocks (
    tenant       text      NOT NULL,
    conversation text      NOT NULL,
    first_turn   bigint    NOT NULL,
    keys         integer[] NOT NULL,
    masks        bigint[]  NOT NULL,
    roles        smallint[] NOT NULL,
    tokens       bigint[]  NOT NULL
) WITH (toast_tuple_target = 8160);
ALTER TABLE search_blocks ALTER keys SET STORAGE MAIN, ALTER masks SET STORAGE MAIN,
    ALTER roles SET STORAGE MAIN, ALTER tokens SET STORAGE MAIN;
CREATE INDEX search_blocks_keys ON search_blocks USING gin (keys);
-- The turns indexed the old way, for the start-up backfill to index again from their profiles.
INSERT INTO search_backlog SELECT tenant, conversation, turn FROM turn_search
ON CONFLICT DO NOTHING;
DROP TABLE turn_search;
