-- Rule 2b (derived anchors must tell their turn apart), pinned turns and the churn guard.

ALTER TABLE turns
    -- A pinned turn is never covered by any summary.
    ADD COLUMN pinned        boolean NOT NULL DEFAULT false,
    -- Whether the client sent the anchors (authoritative) or the service derived them. NULL only
    -- for turns stored before this migration, until the start-up backfill decides.
    ADD COLUMN anchors_given boolean,
    -- The turn's term profile (src/coverage/profile.rs): its candidate anchors and the keys of
    -- every term it holds, as bytes the database never parses. NULL until the backfill computes it.
    ADD COLUMN profile       bytea;

-- What the backfill still has to do: empty once it has run, so looking costs nothing.
CREATE INDEX turns_without_profile ON turns (tenant, conversation, id) WHERE profile IS NULL;

-- Per conversation, in how many turns each term (by key) was a kept candidate: ranks a new
-- turn's candidates by rarity in the conversation.
CREATE TABLE term_counts (
    tenant       text    NOT NULL,
    conversation text    NOT NULL,
    term         integer NOT NULL,
    turns        integer NOT NULL CHECK (turns > 0),
    PRIMARY KEY (tenant, conversation, term),
    FOREIGN KEY (tenant, conversation) REFERENCES conversations (tenant, conversation)
);

-- Which derived anchors decided each covered turn: a little-endian u16 per turn of
-- [from_id, to_id], bit i for the turn's candidate i. NULL for checkpoints decided before rule
-- 2b, whose turns' stored anchors decided.
ALTER TABLE checkpoints ADD COLUMN candidates_used bytea;

-- The churn guard: proposals from one `from` rejected in a row.
ALTER TABLE conversations
    ADD COLUMN rejected_from   bigint,
    ADD COLUMN rejected_streak integer NOT NULL DEFAULT 0 CHECK (rejected_streak >= 0);
