//! The request flows, written once over any [`Store`]: append, propose, pin and the reads.
//!
//! A flow parses nothing and encodes no HTTP: it takes domain values, calls the pure core
//! ([`crate::append`], [`crate::coverage`], [`crate::plan`]) and the store, and returns values or
//! an [`Error`]. CPU-heavy steps run off the async workers ([`cpu`]); a write holds the
//! conversation's lock only for what can change under it (see `propose.rs`).

mod append;
mod lifecycle;
mod pins;
mod propose;
mod reads;
mod search;
mod tenant_slots;

pub use lifecycle::{Erasure, Export, Retention};
pub use propose::Proposed;
pub use tenant_slots::TenantSlots;

use crate::append::AppendConflict;
use crate::coverage::{IdRanges, Policy, ProposalError};
use crate::domain::{ConversationId, ExpectedCheckpoint, TenantId};
use crate::store::{self, IdempotencyClaim, Store, StoredAnswer, WriteTx};
use crate::tokens::TokenCounter;
use std::sync::Arc;
use std::time::Instant;

/// The flows' shared state. Cheap to clone.
#[derive(Clone)]
pub struct Service<S> {
    store: S,
    policy: Policy,
    tokens: TokenCounter,
    /// Checkpoints one conversation may hold; a proposal past it is refused.
    max_checkpoints: i64,
    /// CPU tasks each tenant may run at once.
    cpu: Arc<TenantSlots>,
}

/// What a CPU task does (the label of `gatekeeper_cpu_tasks_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CpuWork {
    /// Token counting and anchor derivation of an append.
    Append,
    /// Counting a summary's tokens.
    CountSummary,
    Decide,
    Plan,
    /// Locating a covered turn's anchors in a long summary.
    Evidence,
    /// Assembling the working context.
    Context,
    /// Ranking search candidates, and locating the terms in the hits.
    Search,
    /// Parsing and checking an import.
    Import,
}

impl CpuWork {
    fn as_str(self) -> &'static str {
        match self {
            CpuWork::Append => "append",
            CpuWork::CountSummary => "count_summary",
            CpuWork::Decide => "decide",
            CpuWork::Plan => "plan",
            CpuWork::Evidence => "evidence",
            CpuWork::Context => "context",
            CpuWork::Search => "search",
            CpuWork::Import => "import",
        }
    }

    /// Its span's name in a trace; an append's task counts tokens and drafts terms in one pass.
    fn span_name(self) -> &'static str {
        match self {
            CpuWork::Append | CpuWork::CountSummary => "count_tokens",
            work => work.as_str(),
        }
    }
}

impl<S: Store> Service<S> {
    /// `cpu_per_tenant`: CPU tasks (token counting, derivation, decisions) one tenant may run
    /// at once; more queue behind their own tenant's, not in front of other tenants'.
    pub fn new(
        store: S,
        policy: Policy,
        tokens: TokenCounter,
        max_checkpoints: i64,
        cpu_per_tenant: usize,
    ) -> Self {
        Self {
            store,
            policy,
            tokens,
            max_checkpoints,
            cpu: Arc::new(TenantSlots::new(cpu_per_tenant)),
        }
    }

    /// Runs CPU-heavy work off the async workers, in one of the tenant's CPU slots, so one big
    /// request does not stall every other, nor one tenant's many requests another tenant's.
    /// `kind` names the work in `gatekeeper_cpu_tasks_total{work}`.
    async fn cpu<T: Send + 'static>(
        &self,
        tenant: &TenantId,
        kind: CpuWork,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        let slot = (self.cpu.of(tenant))
            .acquire_owned()
            .await
            .map_err(|_| Error::Blocking(None))?;
        metrics::counter!("gatekeeper_cpu_tasks_total", "work" => kind.as_str()).increment(1);
        // DEBUG: built only for an exported trace (or a DEBUG log), as a child of the request.
        let span = tracing::debug_span!(
            "cpu",
            otel.name = kind.span_name(),
            gatekeeper.cpu.work = kind.as_str()
        );
        // The slot goes with the work: a request given up on (its client gone, its timeout
        // passed) frees its slot when its work ends, not while the work still runs.
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            span.in_scope(work)
        })
        .await
        .map_err(|e| Error::Blocking(Some(e)))
    }

    pub fn store(&self) -> &S {
        &self.store
    }
}

impl<S: Store> Service<S> {
    /// The flows with reads bound to a store that has seen `min` (a replica, or the primary).
    pub async fn reading_at(&self, min: Option<crate::domain::Position>) -> Self {
        let mut reads = self.clone();
        reads.store = self.store.for_reads(min).await;
        reads
    }

    /// Whether its reads go to a replica.
    pub fn on_replica(&self) -> bool {
        self.store.on_replica()
    }

    /// Whether reads may go to a replica (and so a read may need retrying on the primary).
    pub fn reads_may_use_replicas(&self) -> bool {
        self.store.reads_may_use_replicas()
    }

    /// Where the writes that have returned are, for their answers to carry (`None` without
    /// replicas).
    pub async fn position(&self) -> Result<Option<crate::domain::Position>, store::Error> {
        self.store.position().await
    }

    /// Records the answer to a request that changed nothing else (a dry run, a batch of
    /// replays), so its key cannot be used again for another request.
    async fn record_alone(
        &self,
        (tenant, conversation): (&TenantId, &ConversationId),
        claim: &IdempotencyClaim,
        (status, body): (u16, Vec<u8>),
    ) -> Result<Reply<()>> {
        let mut tx = self.store.begin().await?;
        if let Some(answer) = tx
            .find_answer(tenant, conversation, &claim.key, claim.not_before)
            .await?
        {
            return Ok(Reply::Stored(answer));
        }
        tx.record_answer(tenant, conversation, claim, status, &body)
            .await?;
        tx.commit().await?;
        Ok(Reply::New(()))
    }
}

/// A write's answer: new, or the one an earlier request with the same `Idempotency-Key` got.
#[derive(Debug)]
pub enum Reply<T> {
    New(T),
    Stored(StoredAnswer),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a flow did not do what was asked: a refusal the client can act on, or a fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("conversation {0} does not exist")]
    NoConversation(ConversationId),
    #[error("turn {turn} of conversation {conversation} is not in the log")]
    TurnNotInLog {
        conversation: ConversationId,
        turn: i64,
    },
    #[error("turn {from} of conversation {conversation} is not in the log, which holds turns 0 to {}", next_id - 1)]
    FromNotInLog {
        conversation: ConversationId,
        from: i64,
        next_id: i64,
    },
    #[error("checkpoint {checkpoint_id} of conversation {conversation} does not exist")]
    NoCheckpoint {
        conversation: ConversationId,
        checkpoint_id: i64,
    },
    #[error("turn ids {0} are not in the log")]
    IdsNotInLog(IdRanges),
    #[error("the latest checkpoint is not the expected one")]
    Stale {
        expected: ExpectedCheckpoint,
        latest: Option<i64>,
    },
    #[error("{0}")]
    Invalid(#[from] ProposalError),
    #[error("the batch conflicts with the log")]
    AppendConflict(AppendConflict),
    #[error("conversation {conversation} holds {max} checkpoints, the most one may hold")]
    TooManyCheckpoints {
        conversation: ConversationId,
        max: i64,
    },
    #[error("the import was refused at {0}")]
    Import(crate::transfer::ImportError),
    #[error("conversation {0} already holds turns: an import needs an empty or new conversation")]
    ImportOverExisting(ConversationId),
    #[error("checkpoint {checkpoint_id} already covers turn {turn}")]
    PinCovered { checkpoint_id: i64, turn: i64 },
    #[error(transparent)]
    Store(#[from] store::Error),
    /// A task run off the async workers panicked or was cancelled (or its slots closed).
    #[error("a blocking task failed: {0:?}")]
    Blocking(Option<tokio::task::JoinError>),
}

/// Times how long a write holds its conversation's lock, from the lock to the end of the
/// transaction, whichever way it ends.
struct LockHeld {
    operation: &'static str,
    since: Instant,
}

impl LockHeld {
    fn now(operation: &'static str) -> Self {
        Self {
            operation,
            since: Instant::now(),
        }
    }
}

impl Drop for LockHeld {
    fn drop(&mut self) {
        metrics::histogram!("gatekeeper_write_lock_seconds", "operation" => self.operation)
            .record(self.since.elapsed().as_secs_f64());
    }
}

/// When a write failed on a unique violation and carried a key: the same key was committed
/// concurrently by its twin, whose answer stands.
async fn answer_after_race<S: Store, T>(
    store: &S,
    (tenant, conversation): (&TenantId, &ConversationId),
    claim: Option<&IdempotencyClaim>,
    result: Result<Reply<T>>,
) -> Result<Reply<T>> {
    match (result, claim) {
        (Err(Error::Store(store::Error::Conflict(e))), Some(claim)) => store
            .stored_answer(tenant, conversation, &claim.key, claim.not_before)
            .await?
            .map(Reply::Stored)
            .ok_or(Error::Store(store::Error::Conflict(e))),
        (result, _) => result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use std::sync::mpsc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_cpu_task_keeps_its_slot_until_its_work_ends_though_its_request_is_given_up() {
        let file = std::env::temp_dir().join(format!("gk-cpu-slot-{}.db", std::process::id()));
        let url = format!("sqlite://{}", file.display());
        let store = SqliteStore::open(&url, 1, Duration::from_secs(5))
            .await
            .unwrap();
        let service = Service::new(store, Policy::default(), TokenCounter::default(), 10, 1);
        let tenant = TenantId::parse("t").unwrap();
        let slots = service.cpu.of(&tenant);
        let (started, has_started) = mpsc::channel();
        let (finish, may_finish) = mpsc::channel::<()>();
        let mut task = Box::pin(service.cpu(&tenant, CpuWork::Decide, move || {
            started.send(()).unwrap();
            let _ = may_finish.recv();
        }));
        tokio::select! {
            _ = &mut task => panic!("the work cannot end before it is let"),
            _ = tokio::task::spawn_blocking(move || has_started.recv()) => {}
        }
        // Its request is given up on (as when its client leaves) while the work still runs.
        drop(task);
        assert_eq!(
            slots.available_permits(),
            0,
            "the running work still holds its slot"
        );
        finish.send(()).unwrap();
        let permit = tokio::time::timeout(Duration::from_secs(10), slots.acquire())
            .await
            .expect("the slot comes back once the work ends");
        drop(permit);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }
    }
}
