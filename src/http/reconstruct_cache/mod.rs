//! Reconstruct answers kept in memory, keyed by what cannot change.
//!
//! A turn never changes once logged, and neither does a checkpoint; what can change is which
//! checkpoint decides a turn, and only by a newer checkpoint of its conversation. So an answer is
//! keyed by (tenant, conversation, its incarnation, turn, the conversation's latest checkpoint
//! id). The incarnation is new each time a conversation is created, so one erased and created
//! again (whose checkpoint ids start again at 1) is never answered from the old one's entries;
//! an erasure also drops the old entries, here at once and in other processes when the feed
//! reports it.
//!
//! That id is known without a query while the store's checkpoint feed is up (Postgres: `LISTEN`
//! on a trigger's `NOTIFY`): a reported checkpoint makes its conversation's id unknown, and the
//! next request reads it again. While the feed is down (or on SQLite, which has none), every
//! request reads the id first (one primary-key read). A checkpoint made by another process is
//! seen once its notification arrives, a moment after its commit; until then the previous
//! answer stands, which is still true: the raw turn, or an older checkpoint's summary.

mod answers;

pub use answers::{Answer, AnswerKey, serialize};

use crate::api::ReconstructResponse;
use crate::domain::{ConversationId, TenantId};
use crate::store::{FeedEvent, Head};
use answers::Answers;
use quick_cache::sync::Cache;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

type ConversationKey = (TenantId, ConversationId);

/// Conversations whose latest checkpoint id is remembered; past this, the least used are read
/// again when asked for.
const KNOWN_CONVERSATIONS: usize = 100_000;

pub struct ReconstructCache {
    /// Bounded by bytes: answers differ in size by orders of magnitude.
    answers: Answers,
    /// Each conversation's incarnation and latest checkpoint id, trusted only while `feed_up`.
    latest: Cache<ConversationKey, Head>,
    feed_up: AtomicBool,
    /// Moves on every checkpoint reported and every change of the feed: a read of the latest id
    /// that overlapped a move may be older than the move, so it is not remembered.
    moves: AtomicU64,
    /// Moves on every erasure: an answer read across one is not kept, so that nothing of an
    /// erased conversation stays in memory.
    erasures: AtomicU64,
    /// Conversations the feed reported erased whose answers are still held, and the wake-up of
    /// [`ReconstructCache::forget_reported_erasures`], which drops them.
    reported_erased: Mutex<Vec<ConversationKey>>,
    erasure_reported: Notify,
}

/// Taken before reading a latest checkpoint id from the database; see [`ReconstructCache::learn`].
#[derive(Debug, Clone, Copy)]
pub struct ReadStarted(u64);

impl ReconstructCache {
    /// A cache of at most `max_bytes` of answers; `None` when `max_bytes` is 0.
    pub fn new(max_bytes: u64) -> Option<Self> {
        (max_bytes > 0).then(|| Self {
            answers: Answers::new(max_bytes),
            latest: Cache::new(KNOWN_CONVERSATIONS),
            feed_up: AtomicBool::new(false),
            moves: AtomicU64::new(0),
            erasures: AtomicU64::new(0),
            reported_erased: Mutex::new(Vec::new()),
            erasure_reported: Notify::new(),
        })
    }

    /// The answer for `turn` of `conversation`: from memory when its key is known, else from
    /// `read`. The key needs the conversation's head, read with `read_head` unless the feed
    /// vouches for the one remembered. Both futures run only if needed.
    pub async fn answer<E>(
        &self,
        conversation: ConversationKey,
        turn: i64,
        read_head: impl Future<Output = Result<Head, E>>,
        read: impl Future<Output = Result<ReconstructResponse, E>>,
    ) -> Result<Answer, E> {
        let erasures = self.erasures.load(SeqCst);
        let head = match self.known_head(&conversation) {
            Some(head) => head,
            None => {
                let started = self.read_started();
                let head = read_head.await?;
                self.learn(&conversation, head, started);
                head
            }
        };
        let (tenant, conversation) = conversation;
        let key = AnswerKey {
            tenant,
            conversation,
            incarnation: head.incarnation,
            turn,
            latest_checkpoint: head.latest_checkpoint,
        };
        if let Some(hit) = self.get(&key) {
            return Ok(hit);
        }
        let response = read.await?;
        if self.erasures.load(SeqCst) != erasures {
            return Ok(serialize(response));
        }
        Ok(self.keep(key, response))
    }

    pub fn get(&self, key: &AnswerKey) -> Option<Answer> {
        self.answers.get(key)
    }

    /// Keeps the answer and returns it serialized.
    pub fn keep(&self, key: AnswerKey, response: ReconstructResponse) -> Answer {
        self.answers.keep(key, response)
    }

    /// The conversation's head, when it can be trusted without a query.
    pub fn known_head(&self, conversation: &ConversationKey) -> Option<Head> {
        if !self.feed_up.load(SeqCst) {
            return None;
        }
        self.latest.get(conversation)
    }

    /// Whether the feed is up, so known ids are trusted.
    pub fn feed_is_up(&self) -> bool {
        self.feed_up.load(SeqCst)
    }

    pub fn read_started(&self) -> ReadStarted {
        ReadStarted(self.moves.load(SeqCst))
    }

    /// Remembers a head read from the database, unless something moved while it was read
    /// (then the next request reads it again).
    pub fn learn(&self, conversation: &ConversationKey, head: Head, started: ReadStarted) {
        if !self.feed_up.load(SeqCst) {
            return;
        }
        self.latest.insert(conversation.clone(), head);
        // A move after `started` may have removed the entry before the insert above: undo it.
        // A move after this check removes it itself.
        if self.moves.load(SeqCst) != started.0 {
            self.latest.remove(conversation);
        }
    }

    /// A checkpoint of this conversation committed (here, or reported by the feed).
    pub fn checkpoint_committed(&self, conversation: &ConversationKey) {
        self.moves.fetch_add(1, SeqCst);
        self.latest.remove(conversation);
    }

    /// These conversations were erased here (by a request or by retention): their heads and
    /// every answer and summary of theirs are forgotten by the time this returns. The pass over
    /// the cache (13–16 ms over a full 64 MiB one) runs on the blocking pool, so the requests
    /// queued on this worker thread do not wait for it; the caller does.
    pub async fn conversations_erased(self: &Arc<Self>, conversations: Vec<ConversationKey>) {
        self.stop_answering(&conversations);
        let cache = self.clone();
        let pass = tokio::task::spawn_blocking(move || cache.answers.forget(&conversations));
        if let Err(e) = pass.await {
            // Only a panic in the pass; the erasure counter keeps its answers from being served.
            tracing::error!(error = %e, "forgetting erased conversations' answers failed");
        }
    }

    /// From now on no answer of these conversations is served (their heads are read again) or
    /// kept (an answer read across an erasure is not).
    fn stop_answering(&self, conversations: &[ConversationKey]) {
        self.erasures.fetch_add(1, SeqCst);
        self.moves.fetch_add(1, SeqCst);
        for conversation in conversations {
            self.latest.remove(conversation);
        }
    }

    /// An erasure made by another process: answered from memory no more at once, and its
    /// answers dropped by [`Self::forget_reported_erasures`]. Dropping them here, one pass over the cache for each
    /// report on the feed's task, kept a worker thread for 1.5–2 s after another process erased
    /// 150 conversations at once (a full 64 MiB cache), and the requests queued on it waited.
    fn erased_by_another_process(&self, conversation: ConversationKey) {
        self.stop_answering(std::slice::from_ref(&conversation));
        self.reported_erased.lock().unwrap().push(conversation);
        self.erasure_reported.notify_one();
    }

    /// Drops the answers of the conversations the feed reported erased, for as long as the feed
    /// runs: those reported while a pass runs wait for the next, so a burst of reports costs a
    /// pass or two over the cache, made on the blocking pool rather than on a worker thread.
    pub async fn forget_reported_erasures(self: Arc<Self>) {
        loop {
            self.erasure_reported.notified().await;
            let erased = std::mem::take(&mut *self.reported_erased.lock().unwrap());
            // A wake-up left by reports the last pass already took: no pass over the cache.
            if erased.is_empty() {
                continue;
            }
            let cache = self.clone();
            // Only a panic in the pass fails it; the next report makes another.
            let _ = tokio::task::spawn_blocking(move || cache.answers.forget(&erased)).await;
        }
    }

    /// Whether anything of the conversation is held in memory (for tests and operators: after
    /// an erasure, nothing may be).
    pub fn holds(&self, conversation: &ConversationKey) -> bool {
        self.answers.holds(&conversation.0, &conversation.1)
    }

    /// Applies what the store's checkpoint feed reports.
    pub fn on_feed(&self, event: FeedEvent<'_>) {
        match event {
            FeedEvent::Erased {
                tenant,
                conversation,
            } => {
                if let (Ok(tenant), Ok(conversation)) =
                    (TenantId::parse(tenant), ConversationId::parse(conversation))
                {
                    self.erased_by_another_process((tenant, conversation));
                }
            }
            FeedEvent::Checkpoint {
                tenant,
                conversation,
            } => {
                // A payload that is no valid id matches no cached key: nothing to forget.
                if let (Ok(tenant), Ok(conversation)) =
                    (TenantId::parse(tenant), ConversationId::parse(conversation))
                {
                    self.checkpoint_committed(&(tenant, conversation));
                }
            }
            FeedEvent::Lost => {
                self.feed_up.store(false, SeqCst);
                self.forget_all();
                metrics::gauge!("gatekeeper_checkpoint_feed_up").set(0.0);
            }
            FeedEvent::Connected => {
                // Anything committed or erased while the feed was down went unreported.
                self.forget_all();
                self.erasures.fetch_add(1, SeqCst);
                self.answers.clear();
                self.feed_up.store(true, SeqCst);
                metrics::gauge!("gatekeeper_checkpoint_feed_up").set(1.0);
                tracing::info!("checkpoint feed up: reconstruct answers served without a query");
            }
        }
    }

    fn forget_all(&self) {
        self.moves.fetch_add(1, SeqCst);
        self.latest.clear();
    }
}

#[cfg(test)]
mod tests;
