-- Term counts are derived data, written only under the conversation's lock after the
-- conversation row is locked or created. The foreign key's per-row check was a third of the
-- cost of inserting a batch's new counts (3.5 µs a row), so it goes; the flow keeps the
-- invariant, and whatever deletes a conversation must delete its counts with its turns.
ALTER TABLE term_counts DROP CONSTRAINT term_counts_tenant_conversation_fkey;
