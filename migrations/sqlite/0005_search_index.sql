-- Search over the raw log (src/search.rs): an FTS5 index whose documents are each turn's index
-- keys as tokens (its conversation's, then its terms'), so it finds exactly what the Postgres
-- GIN index finds. Contentless: the text is never needed back.
-- Its rowid is a search_docs row's, an INTEGER PRIMARY KEY that VACUUM keeps (a turn's own
-- rowid it may renumber); search_docs holds what a hit needs. Whatever deletes a
-- conversation's turns must delete its documents too.
CREATE TABLE search_docs (
    doc          INTEGER PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    turn         INTEGER NOT NULL,
    role         TEXT    NOT NULL,
    tokens       INTEGER NOT NULL
) STRICT;
CREATE VIRTUAL TABLE turn_search USING fts5(keys, content = '', columnsize = 0, detail = none, tokenize = 'ascii');
-- The turns stored before this migration, for the start-up backfill to index from their
-- profiles; empty once it has run.
CREATE TABLE search_backlog (
    tenant       TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    turn         INTEGER NOT NULL,
    PRIMARY KEY (tenant, conversation, turn)
) STRICT, WITHOUT ROWID;
INSERT INTO search_backlog SELECT tenant, conversation, id FROM turns;
