//! Storage: the raw turn log and the checkpoints, behind [`Store`] (reads, and write
//! transactions through [`WriteTx`]), with a Postgres and an embedded SQLite backend. Backends
//! only run SQL and decode rows; the flows that use them live in [`crate::service`]. Queries are
//! checked at run time, so building never needs a database; each backend embeds its
//! migrations and applies them when it connects.

mod decode;
mod error;
mod postgres;
mod profiles;
mod sqlite;

pub use error::{Error, Result};
pub use postgres::{MAX_PARTITIONS, PARTITIONED_TABLES, PgStore};
pub use sqlite::SqliteStore;

use crate::append::{Appended, LoggedTurn};
use crate::config::DatabaseConfig;
use crate::context::{CheckpointSpan, ContextSummary, ContextTurn};
use crate::coverage::terms::TermKey;
use crate::coverage::{Outcome, Reason, Role, TurnFacts, Verdict};
use crate::domain::{ConversationId, Position, TenantId};
use crate::search::{Posting, Scope};
use chrono::{DateTime, Utc};
use foldhash::HashMap;
use std::future::Future;
use std::time::Duration;

/// What the service needs of a database: reads on the pool, and write transactions.
///
/// A write transaction serializes with every other one on its conversation, across processes
/// ([`WriteTx::lock_conversation`]); reads never wait for one.
pub trait Store: Clone + Send + Sync + 'static {
    type Tx: WriteTx;

    /// Connects (creating the database if missing) and applies the migrations it lacks.
    fn connect(db: &DatabaseConfig) -> impl Future<Output = anyhow::Result<Self>> + Send;
    fn backend(&self) -> Backend;
    /// Reachable, and every embedded migration applied.
    fn ready(&self) -> impl Future<Output = Result<bool>> + Send;
    fn close(&self) -> impl Future<Output = ()> + Send;
    /// The store a read should use: itself, or (Postgres with read replicas) one bound to a
    /// replica that has replayed `min` or, without `min`, is within the lag bound; the
    /// primary when none can answer in time. Writes always go to the primary.
    fn for_reads(&self, min: Option<Position>) -> impl Future<Output = Self> + Send;
    /// Whether this store's reads go to a replica ([`Store::for_reads`] chose one).
    fn on_replica(&self) -> bool {
        false
    }
    /// Whether [`Store::for_reads`] may choose a replica.
    fn reads_may_use_replicas(&self) -> bool {
        false
    }
    /// The commit position every write that has returned is at or before, when reads may go to
    /// replicas (`None` otherwise: every read sees every commit).
    fn position(&self) -> impl Future<Output = Result<Option<Position>>> + Send;
    /// A write transaction; dropped without [`WriteTx::commit`], it rolls back.
    fn begin(&self) -> impl Future<Output = Result<Self::Tx>> + Send;
    /// Gives every turn stored before term profiles existed its profile, and rebuilds those
    /// conversations' candidate counts; returns how many turns it profiled. Run at start.
    fn backfill_profiles(&self) -> impl Future<Output = Result<u64>> + Send;
    /// Indexes for search every turn stored before the search index existed, from its profile;
    /// returns how many it indexed. Run at start, after [`Store::backfill_profiles`].
    fn backfill_search(&self) -> impl Future<Output = Result<u64>> + Send;
    /// Reports checkpoints as they commit, in any process, until dropped; a connection that
    /// stops answering is reported [`FeedEvent::Lost`] within [`FeedHeartbeat::bound`]. Returns
    /// at once, having reported nothing, on a backend without a feed (SQLite): its callers keep
    /// checking.
    fn follow_checkpoints(
        &self,
        heartbeat: FeedHeartbeat,
        on: impl FnMut(FeedEvent<'_>) + Send,
    ) -> impl Future<Output = ()> + Send;

    /// The answer recorded for an `Idempotency-Key`, unless it expired.
    fn stored_answer(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        key: &str,
        not_before: i64,
    ) -> impl Future<Output = Result<Option<StoredAnswer>>> + Send;
    /// The conversation's incarnation and latest checkpoint id, or `None` if the conversation
    /// does not exist: one primary-key read.
    fn head(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = Result<Option<Head>>> + Send;
    /// The tenant's conversations in name order: at most `page.limit`, each after `page.after`
    /// when given, only those whose name starts with `page.prefix` when given.
    fn conversations(
        &self,
        tenant: &TenantId,
        page: ListPage<'_>,
    ) -> impl Future<Output = Result<Vec<ConversationListing>>> + Send;
    /// The turns `[from, end)` (`turns`) with their stored profiles, in id order, at most `limit`.
    fn export_turns(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turns: (i64, i64),
        limit: u32,
    ) -> impl Future<Output = Result<Vec<ExportedTurn>>> + Send;
    /// The checkpoints `(after, last]` (`checkpoints`), whole (summary, every turn's detail, the candidates
    /// used), in id order, at most `limit`.
    fn export_checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoints: (i64, i64),
        limit: u32,
    ) -> impl Future<Output = Result<Vec<ExportedCheckpoint>>> + Send;
    /// At most `limit` conversations whose last append is older than `idle_since`: of
    /// `tenants` when it names some (`Only`), or of every tenant but those (`AllBut`).
    fn idle_conversations(
        &self,
        tenants: TenantFilter<'_>,
        idle_since: DateTime<Utc>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<(TenantId, ConversationId)>>> + Send;
    fn conversation(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = Result<Option<ConversationRow>>> + Send;
    fn turn(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
    ) -> impl Future<Output = Result<Option<StoredTurn>>> + Send;
    /// The decision facts of the turns `[from, to]`, in id order.
    fn range_facts(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        to: i64,
    ) -> impl Future<Output = Result<Vec<TurnFacts>>> + Send;
    /// At most `limit` turns from `from` on, in id order, without their content.
    fn turn_sizes(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<TurnSize>>> + Send;
    /// Id, role and tokens of every turn from `from` on, in id order.
    fn token_counts_from(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> impl Future<Output = Result<Vec<(i64, Role, u32)>>> + Send;
    /// Newest first, without summaries or per-turn detail: at most `limit`, each older than
    /// `before` when given.
    fn checkpoints(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        before: Option<i64>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<CheckpointRow>>> + Send;
    fn checkpoint(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint_id: i64,
    ) -> impl Future<Output = Result<Option<CheckpointRow>>> + Send;
    /// The turn, and the newest checkpoint whose `[from, advanced_to]` holds it.
    fn reconstruct(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> impl Future<Output = Result<Option<ReconstructRow>>> + Send;
    /// The working context's reads, from one snapshot: the spans first, then only the
    /// summaries and contents [`crate::context::reads`] names (superseded summaries and covered
    /// turns' contents are never read).
    fn context(
        &self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = Result<StoredContext>> + Send;
    /// For each of `keys`, at most `per_key` of the scope's turns indexed under it (in no
    /// particular order).
    fn search_postings(
        &self,
        tenant: &TenantId,
        scope: Scope<'_>,
        keys: &[TermKey],
        per_key: u32,
    ) -> impl Future<Output = Result<Vec<Vec<Posting>>>> + Send;
    /// How many turns the tenant's conversations hold (those whose name starts with `prefix`).
    fn tenant_turns(
        &self,
        tenant: &TenantId,
        prefix: Option<&str>,
    ) -> impl Future<Output = Result<u64>> + Send;
}

/// One write transaction. Each method is one step of SQL; the order of the steps is the
/// service's.
pub trait WriteTx: Send {
    /// Locks the conversation for the rest of the transaction: writes to it from any process
    /// queue here (a row lock on Postgres; SQLite's write lock, taken at `begin`, holds the whole
    /// database). `None` if it does not exist.
    fn lock_conversation(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = Result<Option<LockedConversation>>> + Send;
    /// Like [`WriteTx::lock_conversation`], creating the conversation first if it is new.
    fn lock_or_create_conversation(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = Result<LockedConversation>> + Send;
    fn find_answer(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        key: &str,
        not_before: i64,
    ) -> impl Future<Output = Result<Option<StoredAnswer>>> + Send;
    /// Records the answer for an `Idempotency-Key` (and forgets the tenant's expired ones). The
    /// same key committed meanwhile by another transaction is [`Error::Conflict`].
    fn record_answer(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        claim: &IdempotencyClaim,
        status: u16,
        body: &[u8],
    ) -> impl Future<Output = Result<()>> + Send;
    /// The stored turns among `ids`.
    fn logged_turns(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        ids: &[i64],
    ) -> impl Future<Output = Result<Vec<LoggedTurn>>> + Send;
    /// How many earlier turns of the conversation kept each of `keys` as a candidate.
    fn term_counts(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        keys: &[TermKey],
    ) -> impl Future<Output = Result<HashMap<TermKey, u32>>> + Send;
    /// Inserts the batch's new turns with their profiles, adds their candidate counts and moves
    /// the conversation's next id and token total. The counts' keys must have been read with
    /// [`WriteTx::term_counts`] in this transaction since its last `insert_turns` (Postgres
    /// merges into the rows that read, and refuses keys it did not read).
    fn insert_turns(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        batch: &Appended,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The decision facts of the turns `[from, to]`, in id order, as this transaction sees them.
    fn turn_facts(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
        to: i64,
    ) -> impl Future<Output = Result<Vec<TurnFacts>>> + Send;
    /// Inserts the checkpoint and makes it the conversation's latest (ending any run of
    /// rejections).
    fn insert_checkpoint(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        checkpoint: &NewCheckpoint<'_>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The churn guard's memory: one more rejection from `from` (a rejection from another `from`
    /// starts a new run).
    fn count_rejection(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        from: i64,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The newest checkpoint whose `[from, advanced_to]` holds the turn, if any.
    fn deciding_checkpoint(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> impl Future<Output = Result<Option<DecidingCheckpoint>>> + Send;
    /// Pins or unpins the turn and moves the conversation's facts version; the turn as it now
    /// is, or `None` if the log does not hold it.
    fn set_pinned(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        id: i64,
        pinned: bool,
    ) -> impl Future<Output = Result<Option<StoredTurn>>> + Send;
    /// Deletes the conversation and everything of it: turns, checkpoints, Idempotency-Key
    /// records, candidate counts, search index entries. `false` if it did not exist.
    fn erase(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Gives an imported conversation, its turns and its checkpoints the times and churn-guard
    /// state of the export, which inserting them set to now.
    fn restore(
        &mut self,
        tenant: &TenantId,
        conversation: &ConversationId,
        restored: &Restored<'_>,
    ) -> impl Future<Output = Result<()>> + Send;
    fn commit(self) -> impl Future<Output = Result<()>> + Send;
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

/// The embedded migrations of a backend (tests apply a prefix of them to build an older
/// database).
pub fn migrator(backend: Backend) -> &'static sqlx::migrate::Migrator {
    match backend {
        Backend::Postgres => &postgres::MIGRATOR,
        Backend::Sqlite => &sqlite::MIGRATOR,
    }
}

/// A stored turn with its metadata.
#[derive(Debug, Clone)]
pub struct StoredTurn {
    pub turn: LoggedTurn,
    pub created_at: DateTime<Utc>,
}

/// A turn without its content: its place and size in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnSize {
    pub id: i64,
    pub role: Role,
    pub tokens: u32,
    pub pinned: bool,
}

/// What a cached answer's key needs of its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Head {
    /// Given when the conversation is created: one erased and created again has another.
    pub incarnation: i64,
    pub latest_checkpoint: Option<i64>,
}

/// One page of a tenant's conversations.
#[derive(Debug, Clone, Copy)]
pub struct ListPage<'a> {
    pub prefix: Option<&'a str>,
    pub after: Option<&'a str>,
    pub limit: u32,
}

#[derive(Debug, Clone)]
pub struct ConversationListing {
    pub conversation: String,
    pub next_id: i64,
    pub latest_checkpoint: Option<i64>,
    pub last_append_at: DateTime<Utc>,
}

/// Whose conversations retention looks at.
#[derive(Debug, Clone, Copy)]
pub enum TenantFilter<'a> {
    Only(&'a TenantId),
    AllBut(&'a [TenantId]),
}

/// A turn as an export writes it: the stored turn and its term profile's bytes.
#[derive(Debug, Clone)]
pub struct ExportedTurn {
    pub turn: StoredTurn,
    pub profile: Option<Vec<u8>>,
}

/// A checkpoint whole, as an export writes it.
#[derive(Debug, Clone)]
pub struct ExportedCheckpoint {
    pub checkpoint_id: i64,
    pub created_at: DateTime<Utc>,
    pub summary: String,
    pub verdict: Verdict,
    /// Per turn of the range (empty for a checkpoint stored before they were kept).
    pub candidates_used: Vec<u16>,
}

/// What an import puts back after inserting: the export's times and churn-guard state.
#[derive(Debug, Clone, Copy)]
pub struct Restored<'a> {
    pub created_at: DateTime<Utc>,
    pub last_append_at: DateTime<Utc>,
    pub rejected_from: Option<i64>,
    pub rejected_streak: u32,
    pub turn_times: &'a [(i64, DateTime<Utc>)],
    pub checkpoint_times: &'a [(i64, DateTime<Utc>)],
}

#[derive(Debug, Clone)]
pub struct ConversationRow {
    pub created_at: DateTime<Utc>,
    pub last_append_at: DateTime<Utc>,
    pub next_id: i64,
    pub total_tokens: i64,
    pub checkpoint_count: i64,
    pub latest: Option<LatestCheckpoint>,
    /// Proposals from `rejected_from` rejected in a row (dry runs aside); reset by a checkpoint.
    pub rejected_from: Option<i64>,
    pub rejected_streak: u32,
    /// Moves whenever a stored turn's decision facts change (a pin, the profile backfill).
    pub facts_version: i64,
}

#[derive(Debug, Clone, Copy)]
pub struct LatestCheckpoint {
    pub checkpoint_id: i64,
    pub from: i64,
    pub advanced_to: i64,
    pub outcome: Outcome,
}

/// A conversation as a write transaction holding its lock sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockedConversation {
    pub next_id: i64,
    pub latest_checkpoint: Option<i64>,
    pub checkpoint_count: i64,
    pub facts_version: i64,
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

/// A checkpoint to insert: a verdict that advances, and what decided its covered turns.
#[derive(Debug, Clone, Copy)]
pub struct NewCheckpoint<'a> {
    pub checkpoint_id: i64,
    pub verdict: &'a Verdict,
    pub advanced_to: i64,
    pub summary: &'a str,
    /// Per turn of the range, the derived candidates the decision used (bit i: candidate i).
    pub candidates_used: &'a [u16],
}

/// The checkpoint that decides a turn, and whether it covers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecidingCheckpoint {
    pub checkpoint_id: i64,
    pub covers_turn: bool,
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

/// What the working context reads, in one snapshot: every turn (content only for those
/// [`crate::context::reads`] names), every checkpoint's span, and the summaries it names.
#[derive(Debug, Clone, Default)]
pub struct StoredContext {
    pub turns: Vec<ContextTurn>,
    pub spans: Vec<CheckpointSpan>,
    pub summaries: HashMap<i64, ContextSummary>,
}

/// How a checkpoint feed makes sure its connection still answers. A connection can die without
/// a word (the server's host gone, the network cut: no FIN, no RST) and would then look quiet,
/// not dead; so after `every` without a message the feed asks the server a trivial query on that
/// connection, which must answer within `timeout`, or the feed is lost and connects again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedHeartbeat {
    pub every: Duration,
    pub timeout: Duration,
}

impl FeedHeartbeat {
    /// How long after its connection dies the feed reports it [`FeedEvent::Lost`], at most.
    pub fn bound(&self) -> Duration {
        self.every + self.timeout
    }
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
    /// This conversation was erased.
    Erased {
        tenant: &'a str,
        conversation: &'a str,
    },
}
