-- Tells every listening service process, at commit, that a conversation has a new checkpoint, so
-- each can keep its reconstruct answers without reading the conversation's latest checkpoint id
-- on every request. A trigger rather than the service's own NOTIFY: every writer is covered.
CREATE FUNCTION notify_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(
        'gatekeeper_checkpoints',
        json_build_object(
            'tenant', NEW.tenant,
            'conversation', NEW.conversation,
            'checkpoint_id', NEW.checkpoint_id
        )::text
    );
    RETURN NULL;
END
$$;

CREATE TRIGGER checkpoints_notify AFTER INSERT ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION notify_checkpoint();
