-- The raw turn log and the verified checkpoints. Every key leads with (tenant, conversation)
-- so the tables can later be distributed by conversation.

-- Inclusive [start, end] pairs to a multirange; an empty input gives the empty multirange.
CREATE FUNCTION inclusive_ranges(starts int8[], ends int8[]) RETURNS int8multirange
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(range_agg(int8range(s, e, '[]')), '{}'::int8multirange)
    FROM unnest(starts, ends) AS u(s, e)
$$;

CREATE TABLE conversations (
    tenant            text        NOT NULL,
    conversation      text        NOT NULL,
    next_id           bigint      NOT NULL DEFAULT 0 CHECK (next_id >= 0),
    total_tokens      bigint      NOT NULL DEFAULT 0 CHECK (total_tokens >= 0),
    checkpoint_count  bigint      NOT NULL DEFAULT 0 CHECK (checkpoint_count >= 0),
    latest_checkpoint bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, conversation)
);

CREATE TABLE turns (
    tenant       text        NOT NULL,
    conversation text        NOT NULL,
    id           bigint      NOT NULL CHECK (id >= 0),
    role         text        NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    -- bytea, not text: content must round-trip byte-exactly, \u0000 included.
    content      bytea       NOT NULL,
    tokens       bigint      NOT NULL CHECK (tokens >= 0 AND tokens <= 4294967295),
    anchors      jsonb       NOT NULL CHECK (jsonb_typeof(anchors) = 'array'),
    external_id  text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, conversation, id),
    FOREIGN KEY (tenant, conversation) REFERENCES conversations (tenant, conversation)
);

CREATE TABLE checkpoints (
    tenant         text           NOT NULL,
    conversation   text           NOT NULL,
    checkpoint_id  bigint         NOT NULL CHECK (checkpoint_id > 0),
    from_id        bigint         NOT NULL CHECK (from_id >= 0),
    to_id          bigint         NOT NULL,
    advanced_to    bigint         NOT NULL,
    outcome        text           NOT NULL CHECK (outcome IN ('accepted', 'narrowed', 'partial')),
    -- The pointer set, as ranges rather than a row per turn.
    covered        int8multirange NOT NULL,
    uncovered      int8multirange NOT NULL,
    not_compacted  int8multirange NOT NULL,
    summary        bytea          NOT NULL,
    summary_tokens bigint         NOT NULL CHECK (summary_tokens >= 0),
    -- The whole verdict as answered, per-turn reasons included.
    verdict        jsonb          NOT NULL,
    created_at     timestamptz    NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, conversation, checkpoint_id),
    FOREIGN KEY (tenant, conversation) REFERENCES conversations (tenant, conversation),
    CHECK (from_id <= advanced_to AND advanced_to <= to_id),
    CHECK (NOT isempty(covered)),
    CHECK (NOT (covered && uncovered)),
    CHECK (NOT (covered && not_compacted) AND NOT (uncovered && not_compacted)),
    CHECK (covered + uncovered <@ int8multirange(int8range(from_id, advanced_to, '[]'))),
    CHECK (covered + uncovered + not_compacted = int8multirange(int8range(from_id, to_id, '[]')))
);
