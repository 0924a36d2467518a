-- Idempotency-Key records are kept per conversation (see the Postgres migration of the same name).
CREATE TABLE idempotency_keys_per_conversation (
    tenant       TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    fingerprint  BLOB    NOT NULL,
    status       INTEGER NOT NULL,
    response     BLOB    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, conversation, key)
) STRICT;

INSERT INTO idempotency_keys_per_conversation
    SELECT tenant, json_extract(CAST(response AS TEXT), '$.conversation'), key, fingerprint,
           status, response, created_at
    FROM idempotency_keys
    WHERE json_extract(CAST(response AS TEXT), '$.conversation') IS NOT NULL;

DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_per_conversation RENAME TO idempotency_keys;
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
