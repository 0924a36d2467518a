-- Erasure and retention (DELETE /v1/conversations/{c}, GATEKEEPER_RETENTION_DAYS).

-- Reconstruct answers are cached by checkpoint ids, which start again at 1 when an erased
-- conversation is created again: each conversation gets a random incarnation when it is
-- created (the INSERT gives it), part of every cached key, so no process can take the new one
-- for the old.
ALTER TABLE conversations ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0;
-- What retention measures a conversation's age by.
ALTER TABLE conversations ADD COLUMN last_append_at TEXT NOT NULL DEFAULT '';
UPDATE conversations SET last_append_at = coalesce(
    (SELECT max(t.created_at) FROM turns t
     WHERE t.tenant = conversations.tenant AND t.conversation = conversations.conversation),
    created_at);
CREATE INDEX conversations_by_last_append ON conversations (last_append_at);
