//! A conversation's life beyond appends and checkpoints: the tenant's list, erasure (on
//! request and by retention), export and import.

use super::{CpuWork, Error, Result, Service};
use crate::append::{Appended, CountsAdded, LoggedTurn};
use crate::coverage::TermProfile;
use crate::coverage::terms::TermKey;
use crate::domain::{ConversationId, TenantId};
use crate::store::{
    ConversationListing, ListPage, NewCheckpoint, Restored, Store, StoredTurn, TenantFilter,
    WriteTx,
};
use crate::transfer::{
    self, Checked, CheckpointLine, Header, ImportError, Importer, Line, TurnLine,
};
use chrono::{DateTime, Utc};
use foldhash::HashMap;

/// Turns and checkpoints read (and written, on import) per round trip.
const TURNS_PER_PAGE: u32 = 500;
const CHECKPOINTS_PER_PAGE: u32 = 50;

/// How long conversations are kept after their last append: a default, and tenants' own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    /// `None`: kept for ever (unless the tenant has its own).
    pub default_days: Option<u32>,
    /// Per tenant: `Some(days)`, or `None` to keep its conversations whatever the default.
    pub tenants: Vec<(TenantId, Option<u32>)>,
}

impl Retention {
    pub fn is_off(&self) -> bool {
        self.default_days.is_none() && self.tenants.iter().all(|(_, days)| days.is_none())
    }
}

/// Why erasure happened, for the metric and the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Erasure {
    Request,
    Retention,
}

impl Erasure {
    fn as_str(self) -> &'static str {
        match self {
            Erasure::Request => "request",
            Erasure::Retention => "retention",
        }
    }
}

impl<S: Store> Service<S> {
    pub async fn conversations(
        &self,
        tenant: &TenantId,
        page: ListPage<'_>,
    ) -> Result<Vec<ConversationListing>> {
        Ok(self.store.conversations(tenant, page).await?)
    }

    /// Deletes the conversation and everything of it in one transaction, after any write that
    /// holds its lock.
    pub async fn erase(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        cause: Erasure,
    ) -> Result<()> {
        let mut tx = self.store.begin().await?;
        if tx.lock_conversation(tenant, conversation).await?.is_none() {
            return Err(Error::NoConversation(conversation.clone()));
        }
        tx.erase(tenant, conversation).await?;
        tx.commit().await?;
        metrics::counter!("gatekeeper_conversations_erased_total", "cause" => cause.as_str())
            .increment(1);
        tracing::info!(tenant = %tenant.as_str(), conversation = %conversation.as_str(), cause = cause.as_str(), "conversation erased");
        Ok(())
    }

    /// Erases, in batches of at most `batch`, the conversations whose last append is older
    /// than their tenant's retention at `now`; returns those it erased.
    pub async fn erase_idle(
        &self,
        retention: &Retention,
        now: DateTime<Utc>,
        batch: u32,
    ) -> Result<Vec<(TenantId, ConversationId)>> {
        let own: Vec<TenantId> = retention.tenants.iter().map(|(t, _)| t.clone()).collect();
        let mut rules: Vec<(TenantFilter<'_>, u32)> = retention
            .tenants
            .iter()
            .filter_map(|(tenant, days)| Some((TenantFilter::Only(tenant), (*days)?)))
            .collect();
        if let Some(days) = retention.default_days {
            rules.push((TenantFilter::AllBut(&own), days));
        }
        let mut erased = Vec::new();
        for (tenants, days) in rules {
            let idle_since = now - chrono::Duration::days(i64::from(days));
            let idle = self
                .store
                .idle_conversations(tenants, idle_since, batch)
                .await?;
            for (tenant, conversation) in idle {
                match self.erase(&tenant, &conversation, Erasure::Retention).await {
                    // Erased meanwhile by a request or another process: nothing left to do.
                    Ok(()) | Err(Error::NoConversation(_)) => erased.push((tenant, conversation)),
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(erased)
    }

    /// The conversation as it is now, to be written out page by page
    /// ([`Export::next_chunk`]): what exists at this moment, since turns and checkpoints never
    /// change once written and their ids have no gaps.
    pub async fn export(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> Result<Export<S>> {
        let row = (self.store.conversation(tenant, conversation).await?)
            .ok_or_else(|| Error::NoConversation(conversation.clone()))?;
        let header = Header {
            format: transfer::FORMAT.into(),
            version: transfer::VERSION,
            conversation: conversation.as_str().into(),
            created_at: row.created_at,
            last_append_at: row.last_append_at,
            turns: row.next_id,
            checkpoints: row.checkpoint_count,
            rejected_from: row.rejected_from,
            rejected_streak: row.rejected_streak,
        };
        Ok(Export {
            store: self.store.clone(),
            tenant: tenant.clone(),
            conversation: conversation.clone(),
            header: Some(header),
            turns: (0, row.next_id),
            checkpoints: (0, row.checkpoint_count),
        })
    }

    /// Restores an export into a conversation that does not exist yet (or holds nothing),
    /// in one transaction: every line is checked first, and nothing is written unless all are.
    pub async fn import(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        body: impl AsRef<[u8]> + Send + 'static,
    ) -> Result<Header> {
        let (header, turns, checkpoints) = self
            .cpu(tenant, CpuWork::Import, move || parse_import(body.as_ref()))
            .await?
            .map_err(Error::Import)?;
        let mut tx = self.store.begin().await?;
        let locked = tx.lock_or_create_conversation(tenant, conversation).await?;
        // Checkpoints cover turns, so a conversation without turns holds none.
        if locked.next_id != 0 {
            return Err(Error::ImportOverExisting(conversation.clone()));
        }
        let mut times = Vec::with_capacity(turns.len());
        let mut next_id = 0;
        for chunk in turns.chunks(TURNS_PER_PAGE as usize) {
            let mut added: HashMap<TermKey, u32> = HashMap::default();
            let mut new = Vec::with_capacity(chunk.len());
            for (turn, profile) in chunk {
                for key in profile.candidate_keys() {
                    *added.entry(key).or_insert(0) += 1;
                }
                times.push((turn.id, turn.created_at));
                next_id = turn.id + 1;
                new.push((logged(turn), profile.clone()));
            }
            // As an append does: the counts its keys have so far (the earlier chunks'), read
            // under the lock before they are added to.
            let keys: Vec<TermKey> = added.keys().copied().collect();
            let seen = if keys.is_empty() {
                HashMap::default()
            } else {
                tx.term_counts(tenant, conversation, &keys).await?
            };
            let batch = Appended {
                new,
                replayed: Vec::new(),
                repeated_in_batch: 0,
                next_id,
                counts_added: CountsAdded::split(added, &seen),
            };
            tx.insert_turns(tenant, conversation, &batch).await?;
        }
        let mut checkpoint_times = Vec::with_capacity(checkpoints.len());
        for c in &checkpoints {
            let advanced_to =
                (c.verdict.advanced_to).expect("checked: a stored checkpoint advances");
            let checkpoint = NewCheckpoint {
                checkpoint_id: c.checkpoint_id,
                verdict: &c.verdict,
                advanced_to,
                summary: &c.summary,
                candidates_used: &c.candidates_used,
            };
            tx.insert_checkpoint(tenant, conversation, &checkpoint)
                .await?;
            checkpoint_times.push((c.checkpoint_id, c.created_at));
        }
        let restored = Restored {
            created_at: header.created_at,
            last_append_at: header.last_append_at,
            rejected_from: header.rejected_from,
            rejected_streak: header.rejected_streak,
            turn_times: &times,
            checkpoint_times: &checkpoint_times,
        };
        tx.restore(tenant, conversation, &restored).await?;
        tx.commit().await?;
        metrics::counter!("gatekeeper_conversations_imported_total").increment(1);
        tracing::info!(tenant = %tenant.as_str(), conversation = %conversation.as_str(), turns = header.turns, checkpoints = header.checkpoints, "conversation imported");
        Ok(header)
    }
}

type Parsed = (Header, Vec<(TurnLine, TermProfile)>, Vec<CheckpointLine>);

fn parse_import(body: &[u8]) -> std::result::Result<Parsed, ImportError> {
    let mut importer = Importer::default();
    let (mut header, mut turns, mut checkpoints) = (None, Vec::new(), Vec::new());
    for raw in body.split(|&b| b == b'\n') {
        match importer.line(raw)? {
            None => {}
            Some(Checked::Header(h)) => header = Some(h),
            Some(Checked::Turn(turn, profile)) => {
                let profile = TermProfile::from_bytes(&profile).expect("checked: it decodes");
                turns.push((turn, profile));
            }
            Some(Checked::Checkpoint(c)) => checkpoints.push(c),
        }
    }
    importer.finish()?;
    Ok((header.expect("finish checked it"), turns, checkpoints))
}

fn turn_line(stored: StoredTurn, profile: &[u8]) -> TurnLine {
    let turn = stored.turn;
    TurnLine {
        id: turn.id,
        role: turn.role,
        content: turn.content,
        tokens: turn.tokens,
        anchors: turn.anchors,
        anchors_given: turn.anchors_given,
        external_id: turn.external_id,
        pinned: turn.pinned,
        created_at: stored.created_at,
        profile: transfer::encode_profile(profile),
    }
}

fn logged(turn: &TurnLine) -> LoggedTurn {
    LoggedTurn {
        id: turn.id,
        role: turn.role,
        content: turn.content.clone(),
        tokens: turn.tokens,
        anchors: turn.anchors.clone(),
        anchors_given: turn.anchors_given,
        external_id: turn.external_id.clone(),
        pinned: turn.pinned,
    }
}

/// An export in progress: the header, then pages of turns, then pages of checkpoints.
pub struct Export<S> {
    store: S,
    tenant: TenantId,
    conversation: ConversationId,
    header: Option<Header>,
    /// The next turn id, and where the turns end.
    turns: (i64, i64),
    /// The last checkpoint id written, and the last to write.
    checkpoints: (i64, i64),
}

impl<S: Store> Export<S> {
    /// The next lines, or `None` at the end. A page that comes back short means the
    /// conversation was erased meanwhile: an error, so the answer is cut short, never passed
    /// off as whole.
    pub async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>> {
        if let Some(header) = self.header.take() {
            return Ok(Some(transfer::encode(&Line::Conversation(header))));
        }
        let (tenant, conversation) = (&self.tenant, &self.conversation);
        let mut out = Vec::new();
        let (next, end) = self.turns;
        if next < end {
            let page = (self.store)
                .export_turns(tenant, conversation, (next, end), TURNS_PER_PAGE)
                .await?;
            let expected = (end - next).min(i64::from(TURNS_PER_PAGE));
            if page.len() as i64 != expected {
                return Err(Error::NoConversation(conversation.clone()));
            }
            for t in page {
                let profile = t.profile.ok_or_else(|| {
                    crate::store::Error::invariant(format!(
                        "turn {} has no profile yet",
                        t.turn.turn.id
                    ))
                })?;
                out.extend(transfer::encode(&Line::Turn(turn_line(t.turn, &profile))));
            }
            self.turns.0 += expected;
            return Ok(Some(out));
        }
        let (after, last) = self.checkpoints;
        if after < last {
            let page = (self.store)
                .export_checkpoints(tenant, conversation, (after, last), CHECKPOINTS_PER_PAGE)
                .await?;
            let expected = (last - after).min(i64::from(CHECKPOINTS_PER_PAGE));
            if page.len() as i64 != expected {
                return Err(Error::NoConversation(conversation.clone()));
            }
            for c in page {
                out.extend(transfer::encode(&Line::Checkpoint(CheckpointLine {
                    checkpoint_id: c.checkpoint_id,
                    created_at: c.created_at,
                    summary: c.summary,
                    candidates_used: c.candidates_used,
                    verdict: c.verdict,
                })));
            }
            self.checkpoints.0 += expected;
            return Ok(Some(out));
        }
        Ok(None)
    }
}
