-- Idempotency-Key records: the answer a committed request got, kept per tenant for a while so a
-- retry with the same key gets the same answer and changes nothing. Written in the same
-- transaction as the change it describes.
CREATE TABLE idempotency_keys (
    tenant      text     NOT NULL,
    key         text     NOT NULL,
    -- SHA-256 of method, path and the canonical JSON body: the same key with another request is
    -- refused.
    fingerprint bytea    NOT NULL,
    status      smallint NOT NULL,
    response    bytea    NOT NULL,
    -- Unix seconds, so both backends expire records the same way.
    created_at  bigint   NOT NULL,
    PRIMARY KEY (tenant, key)
);

CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
