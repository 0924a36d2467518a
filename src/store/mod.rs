//! Storage: the raw turn log and the checkpoints, behind one trait with a Postgres and an
//! embedded SQLite implementation. Queries are checked at run time, so building never needs a
//! database; each backend embeds its own migrations and applies them at start.

#[macro_use]
mod by_inherent_methods;
mod postgres;
mod profiles;
mod sqlite;

pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// The embedded migrations of a backend (tests apply a prefix of them to build an older
/// database).
pub fn migrator(backend: Backend) -> &'static sqlx::migrate::Migrator {
    match backend {
        Backend::Postgres => &postgres::MIGRATOR,
        Backend::Sqlite => &sqlite::MIGRATOR,
    }
}

use crate::append::{AppendConflict, Appended, LoggedTurn, PreparedTurn};
use crate::coverage::{
    Decision, IdRanges, Outcome, Policy, Proposal, ProposalError, Reason, Role, TurnFacts, Verdict,
};
use crate::domain::{ConversationId, ExpectedCheckpoint, TenantId};
use chrono::{DateTime, Utc};
use std::future::Future;

/// A stored turn with its metadata.
#[derive(Debug, Clone)]
pub struct StoredTurn {
    pub turn: LoggedTurn,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct ConversationRow {
    pub next_id: i64,
    pub total_tokens: i64,
    pub checkpoint_count: i64,
    pub latest: Option<LatestCheckpoint>,
    /// Proposals from `rejected_from` rejected in a row (dry runs aside); reset by a checkpoint.
    pub rejected_from: Option<i64>,
    pub rejected_streak: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct LatestCheckpoint {
    pub checkpoint_id: i64,
    pub from: i64,
    pub advanced_to: i64,
    pub outcome: Outcome,
}

pub enum AppendResult {
    Done(Appended),
    Conflict(AppendConflict),
    /// The Idempotency-Key was already used by a committed request.
    AlreadyAnswered(StoredAnswer),
}

/// An `Idempotency-Key` to record with the change it guards, in the same transaction, so the
/// change and the record of its answer commit together or not at all.
#[derive(Debug, Clone)]
pub struct IdempotencyClaim {
    pub key: String,
    pub fingerprint: [u8; 32],
    /// Unix seconds now, and the oldest record that still counts.
    pub now: i64,
    pub not_before: i64,
}

/// The answer a committed request got.
#[derive(Debug, Clone)]
pub struct StoredAnswer {
    pub fingerprint: Vec<u8>,
    pub status: u16,
    pub body: Vec<u8>,
}

/// A proposal to decide against the log, under the conversation's lock.
pub struct ProposeInput {
    pub proposal: Proposal,
    pub policy: Policy,
    pub expected: ExpectedCheckpoint,
    pub dry_run: bool,
}

pub enum ProposeResult {
    /// The Idempotency-Key was already used by a committed request.
    AlreadyAnswered(StoredAnswer),
    NoConversation,
    Stale {
        latest: Option<i64>,
    },
    NotInLog {
        missing: IdRanges,
    },
    Invalid(ProposalError),
    /// Decided; persisted (with its id) unless rejected or a dry run.
    Decided {
        verdict: Verdict,
        checkpoint_id: Option<i64>,
    },
}

#[derive(Debug, Clone)]
pub struct CheckpointRow {
    pub checkpoint_id: i64,
    pub created_at: DateTime<Utc>,
    /// Only when one checkpoint is read; lists leave it (and the per-turn detail) out.
    pub summary: Option<String>,
    pub verdict: Verdict,
}

/// A turn and the checkpoint that decides it, if any.
#[derive(Debug, Clone)]
pub struct ReconstructRow {
    pub role: Role,
    pub content: String,
    /// The anchors that decided the turn, when the checkpoint covers it.
    pub deciding_anchors: Vec<String>,
    pub checkpoint: Option<SpanningCheckpoint>,
}

/// What pinning or unpinning a turn came to.
#[derive(Debug, Clone)]
pub enum PinResult {
    /// This tenant's log does not hold the turn.
    NotInLog,
    /// A checkpoint already covers the turn: pinning cannot take its summary back.
    Covered { checkpoint_id: i64 },
    /// Set (or already so); the turn as it now is.
    Done(StoredTurn),
}

/// The newest checkpoint whose `[from, advanced_to]` holds the turn.
#[derive(Debug, Clone)]
pub struct SpanningCheckpoint {
    pub checkpoint_id: i64,
    pub covered: bool,
    /// Present when the checkpoint covers the turn.
    pub summary: Option<String>,
    /// Present when it does not.
    pub reason: Option<Reason>,
}

#[derive(Debug, Clone)]
pub struct ContextTurn {
    pub id: i64,
    pub role: Role,
    pub content: String,
    pub tokens: u32,
}

#[derive(Debug, Clone)]
pub struct ContextCheckpoint {
    pub checkpoint_id: i64,
    pub from: i64,
    pub advanced_to: i64,
    pub covered: IdRanges,
    pub summary: String,
    pub summary_tokens: u32,
}

type R<T> = Result<T, sqlx::Error>;

/// What the service needs of a database. Appends and decisions on one conversation are
/// serialized by the implementation (a row lock, or SQLite's write lock), across processes.
pub trait Storage: Send + Sync {
    /// Reachable, and every embedded migration applied.
    fn ready(&self) -> impl Future<Output = R<bool>> + Send;
    fn close(&self) -> impl Future<Output = ()> + Send;
    /// Appends a batch in one transaction, all or nothing; derived turns get `anchor_count`
    /// provisional anchors, ranked by rarity in the conversation.
    fn append(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: Vec<PreparedTurn>,
        anchor_count: usize,
        claim: Option<&IdempotencyClaim>,
    ) -> impl Future<Output = R<AppendResult>> + Send;
    /// Pins or unpins a turn, under the conversation's lock.
    fn set_pinned(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
        pinned: bool,
    ) -> impl Future<Output = R<PinResult>> + Send;
    /// The decision facts of the turns `[from, to]`, in id order (for the compaction plan).
    fn range_facts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        to: i64,
    ) -> impl Future<Output = R<Vec<TurnFacts>>> + Send;
    /// Gives every turn stored before term profiles existed its profile, and rebuilds those
    /// conversations' candidate counts; returns how many turns it profiled. Run at start.
    fn backfill_profiles(&self) -> impl Future<Output = R<u64>> + Send;
    /// The conversation's latest checkpoint id (`Some(None)`: none yet), or `None` if the
    /// conversation does not exist: one primary-key read.
    fn latest_checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = R<Option<Option<i64>>>> + Send;
    /// The answer recorded for an `Idempotency-Key`, unless it expired.
    fn stored_answer(
        &self,
        tenant: &TenantId,
        key: &str,
        not_before: i64,
    ) -> impl Future<Output = R<Option<StoredAnswer>>> + Send;
    fn turn(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
    ) -> impl Future<Output = R<Option<StoredTurn>>> + Send;
    fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = R<Option<ConversationRow>>> + Send;
    /// Checks, loads, decides and (unless rejected or a dry run) persists, in one transaction.
    fn propose(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        input: ProposeInput,
        claim: Option<&IdempotencyClaim>,
    ) -> impl Future<Output = R<ProposeResult>> + Send;
    /// Newest first, without summaries or per-turn detail.
    fn checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = R<Vec<CheckpointRow>>> + Send;
    fn checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint_id: i64,
    ) -> impl Future<Output = R<Option<CheckpointRow>>> + Send;
    fn reconstruct(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> impl Future<Output = R<Option<ReconstructRow>>> + Send;
    /// Every turn and every checkpoint, both in id order, from one snapshot.
    fn context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = R<(Vec<ContextTurn>, Vec<ContextCheckpoint>)>> + Send;
    /// Id, role and tokens of every turn from `from` on, in id order.
    fn token_counts_from(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> impl Future<Output = R<Vec<(i64, Role, u32)>>> + Send;
}

/// What a store's checkpoint feed reports, for caches that must not outlive a checkpoint made
/// by another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedEvent<'a> {
    /// Listening (again). Checkpoints made before this may have gone unreported.
    Connected,
    /// The feed broke; until the next `Connected`, checkpoints go unreported.
    Lost,
    /// A checkpoint of this conversation was committed.
    Checkpoint {
        tenant: &'a str,
        conversation: &'a str,
    },
}

/// The database in use, chosen by URL at start; the service and handlers only see this.
#[derive(Clone, Debug)]
pub enum Store {
    Postgres(PgStore),
    Sqlite(SqliteStore),
}

/// Which backend a URL selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    pub fn of_url(url: &str) -> Result<Self, String> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else {
            Err(format!(
                "DATABASE_URL must start with postgres:// or sqlite: (got {})",
                crate::config::redact_url(url)
            ))
        }
    }
}

impl Store {
    /// Connects to the URL's backend, creating the database if missing, and migrates.
    pub async fn connect(
        url: &str,
        pool_size: u32,
        acquire_timeout: std::time::Duration,
    ) -> anyhow::Result<Self> {
        Self::connect_waiting(url, pool_size, acquire_timeout, std::time::Duration::ZERO).await
    }

    /// Like [`Store::connect`], waiting up to `startup_wait` for a Postgres server to come up.
    pub async fn connect_waiting(
        url: &str,
        pool_size: u32,
        acquire_timeout: std::time::Duration,
        startup_wait: std::time::Duration,
    ) -> anyhow::Result<Self> {
        Ok(match Backend::of_url(url).map_err(anyhow::Error::msg)? {
            Backend::Postgres => Store::Postgres(
                PgStore::connect_waiting(url, pool_size, acquire_timeout, startup_wait).await?,
            ),
            Backend::Sqlite => {
                Store::Sqlite(SqliteStore::connect(url, pool_size, acquire_timeout).await?)
            }
        })
    }

    pub fn backend(&self) -> Backend {
        match self {
            Store::Postgres(_) => Backend::Postgres,
            Store::Sqlite(_) => Backend::Sqlite,
        }
    }
}

impl Store {
    /// Reports checkpoints as they commit, in any process, until dropped. Returns at once, having
    /// reported nothing, for a backend without a feed (SQLite): its callers keep checking.
    pub async fn follow_checkpoints(&self, on: impl FnMut(FeedEvent<'_>) + Send) {
        match self {
            Store::Postgres(s) => s.follow_checkpoints(on).await,
            Store::Sqlite(_) => {}
        }
    }
}

macro_rules! delegate {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        match $self {
            Store::Postgres(s) => s.$method($($arg),*).await,
            Store::Sqlite(s) => s.$method($($arg),*).await,
        }
    };
}

impl Storage for Store {
    async fn ready(&self) -> R<bool> {
        delegate!(self.ready())
    }
    async fn close(&self) {
        delegate!(self.close())
    }
    async fn append(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: Vec<PreparedTurn>,
        anchor_count: usize,
        claim: Option<&IdempotencyClaim>,
    ) -> R<AppendResult> {
        delegate!(self.append(tenant, conversation, batch, anchor_count, claim))
    }
    async fn set_pinned(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
        pinned: bool,
    ) -> R<PinResult> {
        delegate!(self.set_pinned(tenant, conversation, id, pinned))
    }
    async fn range_facts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        to: i64,
    ) -> R<Vec<TurnFacts>> {
        delegate!(self.range_facts(tenant, conversation, from, to))
    }
    async fn backfill_profiles(&self) -> R<u64> {
        delegate!(self.backfill_profiles())
    }
    async fn stored_answer(
        &self,
        tenant: &TenantId,
        key: &str,
        not_before: i64,
    ) -> R<Option<StoredAnswer>> {
        delegate!(self.stored_answer(tenant, key, not_before))
    }
    async fn latest_checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> R<Option<Option<i64>>> {
        delegate!(self.latest_checkpoint(tenant, conversation))
    }
    async fn turn(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
    ) -> R<Option<StoredTurn>> {
        delegate!(self.turn(tenant, conversation, id))
    }
    async fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> R<Option<ConversationRow>> {
        delegate!(self.conversation(tenant, conversation))
    }
    async fn propose(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        input: ProposeInput,
        claim: Option<&IdempotencyClaim>,
    ) -> R<ProposeResult> {
        delegate!(self.propose(tenant, conversation, input, claim))
    }
    async fn checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> R<Vec<CheckpointRow>> {
        delegate!(self.checkpoints(tenant, conversation))
    }
    async fn checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint_id: i64,
    ) -> R<Option<CheckpointRow>> {
        delegate!(self.checkpoint(tenant, conversation, checkpoint_id))
    }
    async fn reconstruct(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> R<Option<ReconstructRow>> {
        delegate!(self.reconstruct(tenant, conversation, turn))
    }
    async fn context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> R<(Vec<ContextTurn>, Vec<ContextCheckpoint>)> {
        delegate!(self.context(tenant, conversation))
    }
    async fn token_counts_from(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> R<Vec<(i64, Role, u32)>> {
        delegate!(self.token_counts_from(tenant, conversation, from))
    }
}

/// The part of a proposal both backends share once the turns are loaded: decide off the async
/// workers (a 32,000-turn range takes tens of milliseconds) and say whether to persist.
async fn decide_loaded(
    input: &ProposeInput,
    turns: Vec<TurnFacts>,
) -> Result<Result<Decision, ProposalError>, sqlx::Error> {
    let proposal = input.proposal.clone();
    let policy = input.policy;
    tokio::task::spawn_blocking(move || {
        crate::coverage::decide_with_evidence(&proposal, &turns, &policy)
    })
    .await
    .map_err(|e| sqlx::Error::Protocol(format!("the decision task failed: {e}")))
}

/// Before loading anything: the conversation's latest checkpoint must be the expected one, and
/// every id of the range must be in the log.
fn precheck(input: &ProposeInput, next_id: i64, latest: Option<i64>) -> Option<ProposeResult> {
    if !input.expected.admits(latest) {
        return Some(ProposeResult::Stale { latest });
    }
    let (from, to) = (input.proposal.from, input.proposal.to);
    if to >= next_id {
        let missing = IdRanges::from_ranges([crate::coverage::IdRange::new(next_id.max(from), to)]);
        return Some(ProposeResult::NotInLog { missing });
    }
    None
}

fn persists(input: &ProposeInput, verdict: &Verdict) -> bool {
    verdict.outcome != Outcome::Rejected && !input.dry_run
}

fn parse_role(raw: &str) -> Result<Role, sqlx::Error> {
    raw.parse()
        .map_err(|e: String| sqlx::Error::Decode(e.into()))
}

fn parse_outcome(raw: &str) -> Result<Outcome, sqlx::Error> {
    serde_json::from_value(serde_json::Value::String(raw.to_owned()))
        .map_err(|e| sqlx::Error::Decode(e.into()))
}

/// Content is stored as bytes (so `\u0000` survives); it was UTF-8 when it arrived.
fn decode_text(bytes: Vec<u8>) -> Result<String, sqlx::Error> {
    String::from_utf8(bytes).map_err(|e| sqlx::Error::Decode(e.into()))
}

fn decode_tokens(raw: i64) -> Result<u32, sqlx::Error> {
    u32::try_from(raw).map_err(|e| sqlx::Error::Decode(e.into()))
}

fn decode_json<T: serde::de::DeserializeOwned>(raw: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(raw).map_err(|e| sqlx::Error::Decode(e.into()))
}

/// The body recorded for an Idempotency-Key: exactly what the handler answers.
fn verdict_answer(
    conversation: &ConversationId,
    checkpoint_id: i64,
    verdict: &Verdict,
) -> Result<Vec<u8>, sqlx::Error> {
    let response = crate::api::VerdictResponse {
        conversation: conversation.to_string(),
        checkpoint_id: Some(checkpoint_id),
        dry_run: false,
        verdict: verdict.clone(),
    };
    serde_json::to_vec(&response).map_err(|e| sqlx::Error::Encode(e.into()))
}

fn append_answer(conversation: &ConversationId, plan: &Appended) -> Result<Vec<u8>, sqlx::Error> {
    serde_json::to_vec(&crate::api::AppendTurnsResponse::from_plan(
        conversation.as_str(),
        plan,
    ))
    .map_err(|e| sqlx::Error::Encode(e.into()))
}

/// A unique violation on the idempotency record: the same key committed concurrently elsewhere.
fn is_duplicate_key(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}
