-- The raw turn log and the verified checkpoints, for the embedded SQLite backend. Same shape as
-- the Postgres schema; pointer sets are JSON arrays of inclusive [start, end] pairs.

CREATE TABLE conversations (
    tenant            TEXT    NOT NULL,
    conversation      TEXT    NOT NULL,
    next_id           INTEGER NOT NULL DEFAULT 0 CHECK (next_id >= 0),
    total_tokens      INTEGER NOT NULL DEFAULT 0 CHECK (total_tokens >= 0),
    checkpoint_count  INTEGER NOT NULL DEFAULT 0 CHECK (checkpoint_count >= 0),
    latest_checkpoint INTEGER,
    created_at        TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (tenant, conversation)
) STRICT;

CREATE TABLE turns (
    tenant       TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    id           INTEGER NOT NULL CHECK (id >= 0),
    role         TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    -- BLOB, not TEXT: content must round-trip byte-exactly, \u0000 included.
    content      BLOB    NOT NULL,
    tokens       INTEGER NOT NULL CHECK (tokens >= 0 AND tokens <= 4294967295),
    anchors      TEXT    NOT NULL CHECK (json_valid(anchors) AND json_type(anchors) = 'array'),
    external_id  TEXT,
    created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (tenant, conversation, id),
    FOREIGN KEY (tenant, conversation) REFERENCES conversations (tenant, conversation)
) STRICT;

CREATE TABLE checkpoints (
    tenant         TEXT    NOT NULL,
    conversation   TEXT    NOT NULL,
    checkpoint_id  INTEGER NOT NULL CHECK (checkpoint_id > 0),
    from_id        INTEGER NOT NULL CHECK (from_id >= 0),
    to_id          INTEGER NOT NULL,
    advanced_to    INTEGER NOT NULL,
    outcome        TEXT    NOT NULL CHECK (outcome IN ('accepted', 'narrowed', 'partial')),
    covered        TEXT    NOT NULL CHECK (json_valid(covered) AND json_array_length(covered) > 0),
    uncovered      TEXT    NOT NULL CHECK (json_valid(uncovered)),
    not_compacted  TEXT    NOT NULL CHECK (json_valid(not_compacted)),
    summary        BLOB    NOT NULL,
    summary_tokens INTEGER NOT NULL CHECK (summary_tokens >= 0),
    verdict        TEXT    NOT NULL CHECK (json_valid(verdict)),
    created_at     TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (tenant, conversation, checkpoint_id),
    FOREIGN KEY (tenant, conversation) REFERENCES conversations (tenant, conversation),
    CHECK (from_id <= advanced_to AND advanced_to <= to_id)
) STRICT;
