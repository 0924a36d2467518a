-- Rule 2b, pinned turns and the churn guard (see the Postgres migration of the same name).

ALTER TABLE turns ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1));
ALTER TABLE turns ADD COLUMN anchors_given INTEGER CHECK (anchors_given IN (0, 1));
ALTER TABLE turns ADD COLUMN profile BLOB;

CREATE INDEX turns_without_profile ON turns (tenant, conversation, id) WHERE profile IS NULL;

CREATE TABLE term_counts (
    tenant       TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    term         INTEGER NOT NULL,
    turns        INTEGER NOT NULL CHECK (turns > 0),
    PRIMARY KEY (tenant, conversation, term),
    FOREIGN KEY (tenant, conversation) REFERENCES conversations (tenant, conversation)
) STRICT, WITHOUT ROWID;

ALTER TABLE checkpoints ADD COLUMN candidates_used BLOB;

ALTER TABLE conversations ADD COLUMN rejected_from INTEGER;
ALTER TABLE conversations ADD COLUMN rejected_streak INTEGER NOT NULL DEFAULT 0 CHECK (rejected_streak >= 0);
