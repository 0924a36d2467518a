//! The one `Storage` implementation both backends share (see the macro's doc).

/// Both backends implement [`Storage`] the same way, on inherent methods of the same names that
/// hold each one's SQL: one definition serves both.
macro_rules! storage_over_inherent_methods {
    ($store:ty) => {
        impl $store {
            /// The same key committed concurrently elsewhere: its answer stands.
            async fn answer_after_race(
                &self,
                tenant: &TenantId,
                claim: &IdempotencyClaim,
                e: sqlx::Error,
            ) -> R<StoredAnswer> {
                self.read_answer(tenant, &claim.key, claim.not_before)
                    .await?
                    .ok_or(e)
            }
        }

        impl Storage for $store {
            async fn ready(&self) -> R<bool> {
                let applied: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
                        .fetch_one(&self.pool)
                        .await?;
                Ok(applied as usize >= MIGRATOR.iter().count())
            }
            async fn close(&self) {
                self.pool.close().await;
            }
            async fn append(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
                batch: Vec<PreparedTurn>,
                anchor_count: usize,
                claim: Option<&IdempotencyClaim>,
            ) -> R<AppendResult> {
                match (
                    self.append_batch(tenant, conversation, batch, anchor_count, claim)
                        .await,
                    claim,
                ) {
                    (Err(e), Some(claim)) if is_duplicate_key(&e) => self
                        .answer_after_race(tenant, claim, e)
                        .await
                        .map(AppendResult::AlreadyAnswered),
                    (result, _) => result,
                }
            }
            async fn set_pinned(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
                id: i64,
                pinned: bool,
            ) -> R<PinResult> {
                self.write_pinned(tenant, conversation, id, pinned).await
            }
            async fn range_facts(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
                from: i64,
                to: i64,
            ) -> R<Vec<TurnFacts>> {
                let mut conn = self.pool.acquire().await?;
                turn_facts(&mut conn, tenant, conversation, from, to).await
            }
            async fn backfill_profiles(&self) -> R<u64> {
                self.backfill().await
            }
            async fn stored_answer(
                &self,
                tenant: &TenantId,
                key: &str,
                not_before: i64,
            ) -> R<Option<StoredAnswer>> {
                self.read_answer(tenant, key, not_before).await
            }
            async fn latest_checkpoint(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
            ) -> R<Option<Option<i64>>> {
                self.read_latest_checkpoint(tenant, conversation).await
            }
            async fn turn(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
                id: i64,
            ) -> R<Option<StoredTurn>> {
                self.read_turn(tenant, conversation, id).await
            }
            async fn conversation(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
            ) -> R<Option<ConversationRow>> {
                self.read_conversation(tenant, conversation).await
            }
            async fn propose(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
                input: ProposeInput,
                claim: Option<&IdempotencyClaim>,
            ) -> R<ProposeResult> {
                match (
                    self.decide_and_persist(tenant, conversation, input, claim)
                        .await,
                    claim,
                ) {
                    (Err(e), Some(claim)) if is_duplicate_key(&e) => self
                        .answer_after_race(tenant, claim, e)
                        .await
                        .map(ProposeResult::AlreadyAnswered),
                    (result, _) => result,
                }
            }
            async fn checkpoints(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
            ) -> R<Vec<CheckpointRow>> {
                self.list_checkpoints(tenant, conversation).await
            }
            async fn checkpoint(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
                checkpoint_id: i64,
            ) -> R<Option<CheckpointRow>> {
                self.read_checkpoint(tenant, conversation, checkpoint_id)
                    .await
            }
            async fn reconstruct(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
                turn: i64,
            ) -> R<Option<ReconstructRow>> {
                self.read_for_reconstruct(tenant, conversation, turn).await
            }
            async fn context(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
            ) -> R<(Vec<ContextTurn>, Vec<ContextCheckpoint>)> {
                self.read_context(tenant, conversation).await
            }
            async fn token_counts_from(
                &self,
                tenant: &TenantId,
                conversation: &ConversationId,
                from: i64,
            ) -> R<Vec<(i64, Role, u32)>> {
                self.read_token_counts(tenant, conversation, from).await
            }
        }
    };
}
