-- Erasure and retention (DELETE /v1/conversations/{c}, GATEKEEPER_RETENTION_DAYS).

-- Reconstruct answers are cached by checkpoint ids, which start again at 1 when an erased
-- conversation is created again: each conversation gets an incarnation of its own when it is
-- created, part of every cached key, so no process can take the new one for the old.
CREATE SEQUENCE conversation_incarnations;
ALTER TABLE conversations
    ADD COLUMN incarnation bigint NOT NULL DEFAULT nextval('conversation_incarnations'),
    -- What retention measures a conversation's age by.
    ADD COLUMN last_append_at timestamptz;
UPDATE conversations c SET last_append_at = coalesce(
    (SELECT max(t.created_at) FROM turns t
     WHERE t.tenant = c.tenant AND t.conversation = c.conversation),
    c.created_at);
ALTER TABLE conversations
    ALTER COLUMN last_append_at SET DEFAULT now(),
    ALTER COLUMN last_append_at SET NOT NULL;
CREATE INDEX conversations_by_last_append ON conversations (last_append_at);

-- Tells every listening process that a conversation is gone, so each forgets its answers (the
-- channel and payload of the checkpoint feed, with `erased`).
CREATE FUNCTION notify_erased() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(
        'gatekeeper_checkpoints',
        json_build_object('tenant', OLD.tenant, 'conversation', OLD.conversation, 'erased', true)::text
    );
    RETURN NULL;
END
$$;

CREATE TRIGGER conversations_notify_erased AFTER DELETE ON conversations
    FOR EACH ROW EXECUTE FUNCTION notify_erased();
