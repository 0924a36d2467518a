-- Idempotency-Key records (see the Postgres migration of the same name).
CREATE TABLE idempotency_keys (
    tenant      TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    fingerprint BLOB    NOT NULL,
    status      INTEGER NOT NULL,
    response    BLOB    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, key)
) STRICT;

CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
