-- Search over the raw log (src/search.rs). A table of its own, so the turns rows that every
-- reconstruct reads stay as narrow as they were: per turn, what a hit needs (role, tokens) and
-- its index keys (its conversation's, then its terms') in a GIN index, which intersects a
-- term's list with the conversation's. No other index: GIN is the only way in, whatever the
-- planner thinks of a conversation's size. Whatever deletes a conversation's turns must delete its rows here too.
CREATE TABLE turn_search (
    tenant       text    NOT NULL,
    conversation text    NOT NULL,
    turn         bigint  NOT NULL,
    role         text    NOT NULL,
    tokens       bigint  NOT NULL,
    keys         integer[] NOT NULL
);
CREATE INDEX turn_search_keys ON turn_search USING gin (keys);
-- The turns stored before this migration, for the start-up backfill to index from their
-- profiles; empty once it has run.
CREATE TABLE search_backlog (
    tenant       text   NOT NULL,
    conversation text   NOT NULL,
    turn         bigint NOT NULL,
    PRIMARY KEY (tenant, conversation, turn)
);
INSERT INTO search_backlog SELECT tenant, conversation, id FROM turns;
