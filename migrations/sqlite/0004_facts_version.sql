-- Proposals are decided before the write lock is taken (turns never change once appended);
-- what can still change a stored turn's decision facts (a pin, the start-up profile backfill)
-- moves this version, and a proposal whose version moved meanwhile is decided again under the
-- lock.
ALTER TABLE conversations ADD COLUMN facts_version INTEGER NOT NULL DEFAULT 0;
