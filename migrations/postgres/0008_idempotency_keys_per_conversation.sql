-- Idempotency-Key records are kept per conversation, so that every key of the schema leads with
-- (tenant, conversation) and the tables can be partitioned or distributed by it (docs/scaling.md).
-- A key reused on another conversation is now a request of its own there.
ALTER TABLE idempotency_keys ADD COLUMN conversation text;
-- Every recorded answer names its conversation: appends, verdicts, and rejections (whose
-- problem carries the verdict's fields).
UPDATE idempotency_keys
    SET conversation = convert_from(response, 'UTF8')::jsonb ->> 'conversation';
DELETE FROM idempotency_keys WHERE conversation IS NULL;
ALTER TABLE idempotency_keys
    ALTER COLUMN conversation SET NOT NULL,
    DROP CONSTRAINT idempotency_keys_pkey,
    ADD PRIMARY KEY (tenant, conversation, key);
